// Checking stripes under their locks, so user I/O goes on beside: resync after a crash
// (check_stripes with repair, a stripe at a time). Rebuilding a member is volume_rebuild.cpp.
#include <algorithm>
#include <cstring>
#include <optional>

#include "raid/aligned_buffer.hpp"
#include "raid/io_batch.hpp"
#include "raid/volume.hpp"
#include "raid/wait.hpp"

namespace stripefs {

Result<uint64_t> Volume::check_stripes(uint64_t first, uint64_t count, bool repair) {
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
  std::vector<unsigned> missing;  // out of service, or being rebuilt and not past this stripe
  std::vector<std::pair<unsigned, Error>> unreadable;  // slots to heal, and why
  for (size_t i = 0; i < where.size(); ++i) {
    std::byte* at = rows.data() + i * chunk;
    slots.push_back(at);
    const unsigned member = where[i].member;
    if (!members_.in_sync(member, stripe)) {
      missing.push_back(static_cast<unsigned>(i));
      continue;
    }
    const uint64_t offset = data_offset_ + where[i].member_offset;
    if (auto r = member_read(*members_[member], offset, {at, chunk}); !r) {
      const Error why{r.error().code,
                      fmt::format("read failed at member byte {}: {}", offset, r.error().message)};
      if (!level_->survives([&](unsigned m) { return m != member && members_.active(m); })) {
        return fail(r.error());  // nothing could stand for it
      }
      if (healable(member)) {
        unreadable.emplace_back(static_cast<unsigned>(i), why);
      } else {
        members_.fail(member, why);
      }
      missing.push_back(static_cast<unsigned>(i));
    }
  }
  if (!missing.empty()) {
    // Degraded: the missing chunks are what the others make of them, so only redundancy
    // beyond that can disagree (RAID6 with one member out, a mirror with two copies left).
    const size_t redundancy = geometry_.has_parity() ? geometry_.parity_chunks() : where.size() - 1;
    if (missing.size() > redundancy && !unreadable.empty()) {
      return fail(unreadable.front().second);
    }
    // Nothing left to check (those out of service are rebuilt later).
    if (missing.size() >= redundancy && unreadable.empty()) return false;
    if (auto r = level_->rebuild(slots, missing, chunk); !r) return fail(r.error());
    // Unreadable chunks get their contents back (a disk remaps a sector it is written);
    // healed, they are checked with the others.
    for (const auto& [slot, why] : unreadable) {
      if (rewrite_unreadable(where[slot].member, data_offset_ + where[slot].member_offset,
                             {slots[slot], chunk}, expected, why.message)) {
        std::erase(missing, slot);
      }
    }
    if (missing.size() >= redundancy) return false;
  }
  const auto fixes = level_->disagreements(slots, expected, chunk);
  bool wrong = false;
  for (auto [slot, contents] : fixes) {
    if (std::find(missing.begin(), missing.end(), slot) != missing.end()) continue;
    wrong = true;
    if (!repair) continue;
    if (auto r = member_write(*members_[where[slot].member],
                              data_offset_ + where[slot].member_offset, {contents, chunk});
        !r) {
      return fail(r.error());
    }
  }
  return wrong;
}

}  // namespace stripefs
