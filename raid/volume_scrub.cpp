// Scrub: every stripe's redundancy checked under its lock, beside user I/O, and a bad chunk
// rewritten only when the level can name it (Level::locate). Resync (volume_repair.cpp)
// trusts the data and rewrites parity; a scrub never does, since on RAID5 that would turn
// good parity into a copy of bad data.
#include <algorithm>

#include "raid/aligned_buffer.hpp"
#include "raid/log.hpp"
#include "raid/volume.hpp"

namespace stripefs {

Result<void> Volume::scrub_stripes(uint64_t first, uint64_t count, bool repair,
                                   ScrubCounts& counts) {
  if (missing_members() > 0) {
    return fail(EAGAIN, "a scrub needs every member; {} missing", missing_members());
  }
  const uint64_t chunk = geometry_.chunk_size();
  const unsigned width = geometry_.members();
  counts.bad_chunks.resize(width, 0);
  AlignedBuffer rows(uint64_t{width} * chunk), scratch(2 * chunk);
  const uint64_t last = std::min(first + count, geometry_.stripes());
  for (uint64_t stripe = first; stripe < last; ++stripe) {
    const std::vector<ChunkLocation> where = level_->redundancy_set(stripe);
    if (where.empty()) continue;  // RAID0: nothing to check against
    locks_.lock(stripe);
    std::vector<std::byte*> slots;
    Result<void> status;
    // A member that left service meanwhile (failed, or being rebuilt) has nothing to check.
    for (const ChunkLocation& at : where) {
      if (status && !active(at.member)) {
        status = fail(EAGAIN, "member {} is out of service; a scrub needs every member", at.member);
      }
    }
    for (size_t i = 0; i < where.size() && status; ++i) {
      slots.push_back(rows.data() + i * chunk);
      status = member_read(*members_[where[i].member], data_offset_ + where[i].member_offset,
                           {slots.back(), chunk});
    }
    parity::Located found;
    if (status) found = level_->locate(slots, scratch.span(), chunk);
    if (status && found.kind == parity::Located::Kind::one && repair) {
      const unsigned missing[] = {found.index};
      status = level_->rebuild(slots, missing, chunk);
      const ChunkLocation& bad = where[found.index];
      if (status) {
        status = member_write(*members_[bad.member], data_offset_ + bad.member_offset,
                              {slots[found.index], chunk});
      }
    }
    locks_.release(stripe);
    if (!status)
      return fail(status.error().code, "scrub, stripe {}: {}", stripe, status.error().message);
    ++counts.stripes;
    if (found.kind == parity::Located::Kind::consistent) continue;
    ++counts.mismatched;
    if (found.kind == parity::Located::Kind::unknown) {
      ++counts.unrepairable;
      raid_log().error(
          "scrub: stripe {} is inconsistent and no chunk can be named bad; left as it is", stripe);
      continue;
    }
    const ChunkLocation& bad = where[found.index];
    ++counts.bad_chunks[bad.member];
    if (repair) ++counts.repaired;
    raid_log().warn("scrub: stripe {}: member {} ({}), data-area byte {}, is wrong{}", stripe,
                    bad.member, members_[bad.member]->name(), bad.member_offset,
                    repair ? "; rewritten from the others" : "");
  }
  return {};
}

}  // namespace stripefs
