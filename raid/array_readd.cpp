// Re-adding members that were away, while the array is being opened.
#include "raid/array_opening.hpp"
#include "raid/log.hpp"

namespace stripefs {

void readd_returning(ArrayOpening& a) {
  Volume& volume = *a.volume;
  for (const auto& r : a.returning) {
    Result<void> rebuilt;
    uint64_t stripes = 0;
    bool own_fault = false;
    for (auto [begin, end] : a.intent->ranges_missed_since(r.events)) {
      auto [first, last] = volume.stripes_of(begin, end);
      rebuilt = volume.rebuild_member(r.role, first, last - first + 1, &own_fault);
      if (!rebuilt) break;
      stripes += last - first + 1;
    }
    // Everything from here on writes to the member itself.
    if (rebuilt && !(rebuilt = member_flush(*r.member))) own_fault = true;
    if (rebuilt && !(rebuilt = a.intent->member_returned(*r.member))) own_fault = true;
    // (A failed journal copy may be the source's fault: not held against the member.)
    if (rebuilt && a.stripe_log) rebuilt = a.stripe_log->member_returned(r.role);
    if (!rebuilt) {
      // Its own I/O error: recorded failed, not retried at every mount.
      if (own_fault) a.broken.push_back(r.role);
      a.assembly.notes.push_back(fmt::format("{}: re-adding it failed{}: {}", r.note,
                                             own_fault ? " (recorded failed)" : "",
                                             rebuilt.error().message));
      continue;
    }
    a.readded.push_back(r.role);
    a.assembly.by_role[r.role] = r.member;
    a.assembly.notes.push_back(fmt::format(
        "member {} (role {}) was away; re-added, {} stripes rebuilt where the bitmap recorded "
        "writes",
        r.member->name(), r.role, stripes));
    raid_log().warn("array {}: {}", format_uuid(a.sb().array_uuid), a.assembly.notes.back());
  }
}

}  // namespace stripefs
