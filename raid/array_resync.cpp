// Resync after an unclean shutdown: which stripes, and the background thread that makes
// them consistent again while the array is in use.
#include "raid/array_opening.hpp"
#include "raid/log.hpp"

namespace stripefs {

std::vector<std::pair<uint64_t, uint64_t>> stripes_to_resync(const ArrayOpening& a) {
  std::vector<std::pair<uint64_t, uint64_t>> to_resync;
  // Degraded too: check_stripes checks what redundancy is left (RAID6 with one member out,
  // mirrors with two copies left), and a missing member's chunks are made from the others
  // when it is rebuilt or re-added.
  if (a.sb().clean()) return to_resync;
  if (a.intent && !(a.stripe_log && a.stripe_log->lost_records())) {
    for (auto [begin, end] : a.intent->ranges_to_resync()) {
      to_resync.push_back(a.volume->stripes_of(begin, end));
    }
  } else {
    to_resync.emplace_back(0, a.volume->geometry().stripes() - 1);
  }
  raid_log().warn("array {}: not shut down cleanly; resyncing {} stripe range(s){}",
                  format_uuid(a.sb().array_uuid), to_resync.size(),
                  a.intent ? " recorded in the bitmap" : " (no bitmap: everything)");
  return to_resync;
}

void Array::start_resync(std::vector<std::pair<uint64_t, uint64_t>> stripe_ranges) {
  uint64_t total = 0;
  for (auto [first, last] : stripe_ranges) total += last - first + 1;
  resync_ = ResyncProgress{0, total, 0, false, std::nullopt};
  resync_thread_ = std::thread(
      [this, ranges = std::move(stripe_ranges)]() mutable { resync(std::move(ranges)); });
}

void Array::resync(std::vector<std::pair<uint64_t, uint64_t>> stripe_ranges) {
  // In steps, so writes to the same stripes wait for one step at most.
  constexpr uint64_t kStep = 64;
  for (auto [first, last] : stripe_ranges) {
    for (uint64_t at = first; at <= last; at += kStep) {
      const uint64_t count = std::min(kStep, last - at + 1);
      auto repaired = volume_->check_stripes(at, count, /*repair=*/true);
      std::lock_guard lock(resync_mutex_);
      if (!repaired) {
        resync_.error = repaired.error();
        resync_.finished = true;
        raid_log().error("resync: {}", repaired.error().message);
        return;
      }
      resync_.done += count;
      resync_.repaired += *repaired;
    }
    if (intent_) {
      auto [begin, end] = volume_->member_range(first, last);
      intent_->resynced(begin, std::min(end, volume_->geometry().member_data_size()));
    }
  }
  {
    std::lock_guard lock(resync_mutex_);
    resync_.finished = true;
    raid_log().info("resync done: {} stripes checked, {} repaired", resync_.done, resync_.repaired);
  }
  if (scrub_after_resync_.exchange(false)) resume_scrub();  // a scrub the crash cut short
}

ResyncProgress Array::resync_progress() const {
  std::lock_guard lock(resync_mutex_);
  return resync_;
}

ResyncProgress Array::wait_resync() {
  if (resync_thread_.joinable()) resync_thread_.join();
  return resync_progress();
}

}  // namespace stripefs
