// A hot replace cut short by a close or a crash, resumed at the next open (md resumes its
// replacement from its recovery_offset): the new device stands in the Volume again beside
// the role's device, complete below its checkpoint; what it may have missed there is copied
// again first, and the copy goes on from the checkpoint on the rebuild thread.
#include <algorithm>
#include <cstring>

#include "raid/aligned_buffer.hpp"
#include "raid/array_opening.hpp"
#include "raid/log.hpp"

namespace stripefs {

namespace {

// What a new device may have missed below its checkpoint `copied`: the metadata areas
// (bitmap and journal copies, rewritten whole; they are small), and, after a crash, the
// ranges of data that may have been written to one device and not the other.
std::vector<std::pair<uint64_t, uint64_t>> missed_ranges(const ArrayOpening& a, uint64_t begin,
                                                         uint64_t copied) {
  const Superblock& sb = a.sb();
  std::vector<std::pair<uint64_t, uint64_t>> ranges{{begin, std::min(sb.data_offset, copied)}};
  if (sb.clean()) return ranges;  // every write reached both, and was flushed by the close
  const uint64_t data_copied = copied > sb.data_offset ? copied - sb.data_offset : 0;
  if (a.intent && !(a.stripe_log && a.stripe_log->lost_records())) {
    for (auto [b, e] : a.intent->ranges_to_resync()) {
      if (b < data_copied) {
        ranges.emplace_back(sb.data_offset + b, sb.data_offset + std::min(e, data_copied));
      }
    }
  } else {
    ranges.emplace_back(sb.data_offset, sb.data_offset + data_copied);
  }
  return ranges;
}

}  // namespace

void resume_replaces(ArrayOpening& a) {
  const Superblock& sb = a.sb();
  for (const Assembly::Replacing& r : a.assembly.replacing) {
    Member* old = a.assembly.by_role[r.role];
    if (old == nullptr || !a.volume->active(r.role)) {
      a.assembly.notes.push_back(
          fmt::format("replacement {} of role {}: the role's device is out of service; kept out",
                      r.member->name(), r.role));
      continue;
    }
    auto copy =
        std::make_unique<ReplacingMember>(*old, *r.member, kSuperblockOffset + kSuperblockSize,
                                          sb.data_offset + sb.data_size, r.checkpoint);
    a.volume->swap_member(r.role, copy.get());
    a.replaces.push_back({r.role, std::move(copy), r.uuid});
  }
}

void recopy_replaced(ArrayOpening& a) {
  for (auto it = a.replaces.begin(); it != a.replaces.end();) {
    ReplacingMember& copy = *it->copy;
    const auto ranges = missed_ranges(a, copy.begin(), copy.copied());
    uint64_t bytes = 0;
    for (auto [b, e] : ranges) bytes += e > b ? e - b : 0;
    // Through the copy, piece by piece: the stripe log's checkpointer and the bitmap's
    // cleaner may write these areas already, and their writes wait for each piece.
    Result<void> done;
    for (auto [b, e] : ranges) {
      if (done) done = copy.recopy(b, e);
    }
    if (done) done = member_flush(copy.replacement());
    if (done) {
      raid_log().warn(
          "array {}: resuming the replace of role {} ({}) by {} at byte {} ({} bytes "
          "below it copied again)",
          format_uuid(a.sb().array_uuid), it->role, copy.old_device().name(),
          copy.replacement().name(), copy.copied(), bytes);
      ++it;
      continue;
    }
    // The old device serves alone, as it did; the new one is wiped, so it is not resumed.
    copy.hand_over_back();
    a.volume->swap_member(it->role, &copy.old_device());
    AlignedBuffer blank(kSuperblockSize);
    std::memset(blank.data(), 0, blank.size());
    (void)member_write(copy.replacement(), kSuperblockOffset, blank.span(), /*fua=*/true);
    a.assembly.notes.push_back(fmt::format(
        "replacement {} of role {}: bringing its copy up to date failed ({}); not resumed: run "
        "the replace again",
        copy.replacement().name(), it->role, done.error().message));
    a.given_up.push_back(std::move(it->copy));
    it = a.replaces.erase(it);
  }
}

void Array::adopt_replaces(ArrayOpening& a) {
  std::lock_guard lock(mutex_);
  for (ResumedReplace& r : a.replaces) {
    replace_uuids_[r.role] = r.uuid;
    replace_checkpoints_[r.role] = r.copy->copied();
    replacing_[r.role] = std::move(r.copy);
  }
  for (auto& copy : a.given_up) retired_.push_back(std::move(copy));
  a.given_up.clear();
}

}  // namespace stripefs
