// The scrub as a background task: Volume::scrub_stripes over the whole array, a round of
// stripes at a time, paced by the rebuild's speed limits (md runs check and repair at the
// same sync speed), its counts kept for status.
#include <algorithm>

#include "raid/array.hpp"
#include "raid/log.hpp"

namespace stripefs {

Result<void> Array::start_scrub(bool repair) {
  if (volume_->geometry().level() == RaidLevel::raid0) {
    return fail(EINVAL, "RAID0 keeps no redundancy: there is nothing to scrub");
  }
  if (const unsigned missing = volume_->missing_members(); missing > 0) {
    return fail(EAGAIN, "a scrub needs every member; {} out of service (rebuild first)", missing);
  }
  std::lock_guard lock(scrub_mutex_);
  if (scrub_.running) {
    return fail(EBUSY, "a scrub is running already ({} of {} stripes checked)", scrub_.done,
                scrub_.total);
  }
  if (!resync_progress().finished) return fail(EBUSY, "a resync is running; scrub after it");
  if (rebuild_progress().running) {
    return fail(EBUSY, "a rebuild or replace is running; scrub after it");
  }
  if (scrub_thread_.joinable()) scrub_thread_.join();
  scrub_ = ScrubProgress{};
  scrub_.running = true;
  scrub_.repair = repair;
  scrub_.checksums = scrub_checker_ != nullptr;
  scrub_.total = volume_->geometry().stripes();
  scrub_stopping_ = false;
  raid_log().info("array {}: scrub started{}", format_uuid(superblock().array_uuid),
                  repair ? " (repairing)" : "");
  scrub_thread_ =
      std::thread([this, repair, checker = scrub_checker_] { scrub_loop(repair, checker); });
  return {};
}

void Array::scrub_loop(bool repair, ScrubChecker* checker) {
  const Geometry& g = volume_->geometry();
  const uint64_t stripes = g.stripes();
  const auto started = std::chrono::steady_clock::now();
  Pacing pacing = start_pacing();
  Result<void> status;
  bool stopped = false;
  if (checker != nullptr) status = checker->begin(scrub_stopping_);
  for (uint64_t stripe = 0; stripe < stripes && status;) {
    stopped = scrub_stopping_.load();
    {
      std::lock_guard lock(rebuild_mutex_);
      stopped = stopped || rebuild_stopping_;  // the array is closing
    }
    if (stopped) break;
    const uint64_t count =
        std::min(std::max<uint64_t>(1, step_bytes() / g.chunk_size()), stripes - stripe);
    Volume::ScrubCounts found;
    std::unique_ptr<ScrubBatch> batch;
    if (checker != nullptr) {
      auto made =
          checker->batch(stripe * g.stripe_data_size(), (stripe + count) * g.stripe_data_size());
      if (made) {
        batch = std::move(*made);
      } else {
        status = fail(made.error().code, "checksums of volume bytes from {}: {}",
                      stripe * g.stripe_data_size(), made.error().message);
      }
    }
    if (status) status = volume_->scrub_stripes(stripe, count, repair, found, batch.get());
    batch.reset();  // the filesystem may reuse the blocks again
    {
      std::lock_guard lock(scrub_mutex_);
      scrub_.counts.add(found);
      scrub_.done = stripe + found.stripes;
      scrub_.seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    }
    if (!status) break;
    stripe += count;
    pace(pacing, count * g.chunk_size(), &scrub_stopping_);
  }
  if (checker != nullptr) checker->end();
  ScrubProgress ended;
  {
    std::lock_guard lock(scrub_mutex_);
    scrub_.running = false;
    scrub_.stopped = stopped;
    if (!status) scrub_.error = status.error();
    scrub_.ended = std::chrono::system_clock::now();
    ended = scrub_;
  }
  scrub_cv_.notify_all();
  const std::string array = format_uuid(superblock().array_uuid);
  const std::string summary = fmt::format(
      "{} of {} stripes checked, {} inconsistent ({} data and {} parity chunks bad), {} "
      "repaired, {} unrepairable; {} blocks checked against checksums, {} failed",
      ended.done, ended.total, ended.counts.mismatched, ended.counts.bad_data,
      ended.counts.bad_parity, ended.counts.repaired, ended.counts.unrepairable,
      ended.counts.verified_blocks, ended.counts.checksum_failures);
  if (!status) {
    raid_log().error("array {}: scrub failed: {}; {}", array, status.error().message, summary);
  } else {
    raid_log().info("array {}: scrub {}: {}", array, stopped ? "stopped" : "finished", summary);
  }
  emit({ArrayEvent::Kind::scrub_finished, 0, "",
        !status   ? fmt::format("failed: {}; {}", status.error().message, summary)
        : stopped ? "stopped; " + summary
                  : summary});
}

void Array::stop_scrub() {
  std::thread thread;
  {
    std::lock_guard lock(scrub_mutex_);
    scrub_stopping_ = true;
    thread = std::move(scrub_thread_);
  }
  {
    std::lock_guard lock(rebuild_mutex_);  // a pause in pace() sees it: no lost wake-up
  }
  rebuild_cv_.notify_all();
  if (thread.joinable()) {
    thread.join();  // within the round under way
  } else {
    wait_scrub();  // another caller is joining it
  }
}

void Array::set_scrub_checker(ScrubChecker* checker) {
  {
    std::lock_guard lock(scrub_mutex_);
    scrub_checker_ = checker;
  }
  stop_scrub();  // one started before has the old checker
}

ScrubProgress Array::scrub_progress() const {
  std::lock_guard lock(scrub_mutex_);
  return scrub_;
}

ScrubProgress Array::wait_scrub() {
  std::unique_lock lock(scrub_mutex_);
  scrub_cv_.wait(lock, [this] { return !scrub_.running; });
  return scrub_;
}

}  // namespace stripefs
