// Checking and rebuilding stripes, one at a time under its lock so user I/O goes on beside:
// resync after a crash (check_stripes with repair) and re-adding a member that was away
// (rebuild_member). Rebuild onto a new disk, replace and scrub belong here too.
#include <algorithm>
#include <optional>

#include "raid/aligned_buffer.hpp"
#include "raid/volume.hpp"

namespace stripefs {

Result<void> Volume::rebuild_member(unsigned member, uint64_t first, uint64_t count,
                                    bool* target_failed) {
  if (member >= members_.size() || members_[member] == nullptr || active(member)) {
    return fail(EINVAL, "member {} is not held out for a rebuild", member);
  }
  Member* target = members_[member];
  const bool recovering = members_.recovering(member);
  AlignedBuffer rows(uint64_t{geometry_.members()} * geometry_.chunk_size());
  const uint64_t last = std::min(first + count, geometry_.stripes());
  for (uint64_t stripe = first; stripe < last; ++stripe) {
    const std::vector<ChunkLocation> where = level_->redundancy_set(stripe);
    std::optional<size_t> mine;
    for (size_t i = 0; i < where.size(); ++i) {
      if (where[i].member == member) mine = i;
    }
    if (!mine) {  // this stripe keeps nothing on the member (RAID10)
      if (recovering) members_.set_recovered(member, stripe + 1);
      continue;
    }
    locks_.lock(stripe);
    Result<void> done = rebuild_chunk(stripe, where, *mine, rows.span(), *target);
    if (!done && target_failed != nullptr && done.error().code == kTargetFailed) {
      *target_failed = true;
    }
    // In sync from now on: the next write to this stripe goes to the member too.
    if (done && recovering) members_.set_recovered(member, stripe + 1);
    locks_.release(stripe);
    if (!done) {
      return fail(done.error().code == kTargetFailed ? EIO : done.error().code,
                  "rebuilding member {} ({}), stripe {}: {}", member, target->name(), stripe,
                  done.error().message);
    }
  }
  return {};
}

// Under the stripe's lock: the chunks of the stripe's set on members in service are read,
// slot `mine` rebuilt from them and written to `target`. A source that fails to read is
// taken out of service and the stripe tried again with what is left; a target that fails to
// write is taken out (when it is being rebuilt in service) and reported as kTargetFailed.
Result<void> Volume::rebuild_chunk(uint64_t stripe, const std::vector<ChunkLocation>& where,
                                   size_t mine, std::span<std::byte> rows, Member& target) {
  const uint64_t chunk = geometry_.chunk_size();
  for (;;) {
    std::vector<std::byte*> slots;
    std::vector<unsigned> missing;
    for (size_t i = 0; i < where.size(); ++i) {
      slots.push_back(rows.data() + i * chunk);
      if (!active(where[i].member)) missing.push_back(static_cast<unsigned>(i));
    }
    bool source_failed = false;
    for (size_t i = 0; i < where.size(); ++i) {
      if (!active(where[i].member)) continue;
      auto r = member_read(*members_[where[i].member], data_offset_ + where[i].member_offset,
                           {slots[i], chunk});
      if (!r) {
        members_.fail(where[i].member, r.error());
        source_failed = true;
        break;
      }
    }
    if (source_failed) {
      if (failed()) return fail(EIO, "stripe {}: too many members failed", stripe);
      continue;  // again, with one source fewer
    }
    if (auto r = level_->rebuild(slots, missing, chunk); !r) return r;
    if (auto r =
            member_write(target, data_offset_ + where[mine].member_offset, {slots[mine], chunk});
        !r) {
      const unsigned member = where[mine].member;
      if (members_.recovering(member)) members_.fail(member, r.error());
      return fail(kTargetFailed, "{}", r.error().message);
    }
    return {};
  }
}

Result<uint64_t> Volume::check_stripes(uint64_t first, uint64_t count, bool repair) {
  if (missing_members() > 0) {
    return fail(EAGAIN, "checking stripes needs every member; {} missing", missing_members());
  }
  const uint64_t chunk = geometry_.chunk_size();
  AlignedBuffer rows(uint64_t{geometry_.members()} * chunk), expected(2 * chunk);
  uint64_t inconsistent = 0;
  const uint64_t last = std::min(first + count, geometry_.stripes());
  for (uint64_t stripe = first; stripe < last; ++stripe) {
    // Under the stripe's lock: a concurrent write cannot change data and parity meanwhile.
    locks_.lock(stripe);
    auto bad = check_stripe(stripe, repair, rows.span(), expected.span());
    locks_.release(stripe);
    if (!bad) return fail(bad.error());
    inconsistent += *bad ? 1 : 0;
  }
  return inconsistent;
}

Result<bool> Volume::check_stripe(uint64_t stripe, bool repair, std::span<std::byte> rows,
                                  std::span<std::byte> expected) {
  const uint64_t chunk = geometry_.chunk_size();
  const std::vector<ChunkLocation> where = level_->redundancy_set(stripe);
  if (where.empty()) return false;  // nothing to compare (RAID0)
  std::vector<std::byte*> slots;
  for (size_t i = 0; i < where.size(); ++i) {
    std::byte* at = rows.data() + i * chunk;
    slots.push_back(at);
    if (auto r = member_read(*members_[where[i].member], data_offset_ + where[i].member_offset,
                             {at, chunk});
        !r) {
      return fail(r.error());
    }
  }
  const auto fixes = level_->disagreements(slots, expected, chunk);
  if (repair) {
    for (auto [slot, contents] : fixes) {
      if (auto r = member_write(*members_[where[slot].member],
                                data_offset_ + where[slot].member_offset, {contents, chunk});
          !r) {
        return fail(r.error());
      }
    }
  }
  return !fixes.empty();
}

}  // namespace stripefs
