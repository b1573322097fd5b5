// The scrub as a background task: Volume::scrub_stripes over the whole array, a round of
// stripes at a time, paced by the rebuild's speed limits (md runs check and repair at the
// same sync speed), its counts kept for status. How far it got is checkpointed in the
// superblocks, as a rebuild's is (ZFS resumes a scrub after an export or a reboot too).
#include <algorithm>

#include "raid/array.hpp"
#include "raid/log.hpp"

namespace stripefs {

namespace {

constexpr auto kScrubCheckpointEvery = std::chrono::seconds(5);

}  // namespace

Result<void> Array::start_scrub(bool repair) {
  return start_scrub_from(repair, 0, {});
}

bool Array::resume_scrub() {
  uint64_t from;
  bool repair;
  Volume::ScrubCounts so_far;
  {
    std::lock_guard lock(mutex_);
    from = master_.scrub_checkpoint;
    repair = (master_.scrub_flags & Superblock::kScrubRepair) != 0;
    so_far.mismatched = master_.scrub_mismatched;
    so_far.repaired = master_.scrub_repaired;
    so_far.unrepairable = master_.scrub_unrepairable;
  }
  if (from == kNoScrub) return false;
  if (!resync_progress().finished) {
    // After a crash: the resync goes first, and its end starts this (Array::resync).
    scrub_after_resync_ = true;
    if (!resync_progress().finished || !scrub_after_resync_.exchange(false)) return true;
  }
  if (auto r = start_scrub_from(repair, std::min(from, volume_->geometry().stripes()), so_far);
      !r) {
    raid_log().warn("array {}: the scrub cut short at stripe {} is not resumed: {}",
                    format_uuid(superblock().array_uuid), from, r.error().message);
    return false;
  }
  return true;
}

Result<void> Array::start_scrub_from(bool repair, uint64_t from,
                                     const Volume::ScrubCounts& so_far) {
  if (volume_->geometry().level() == RaidLevel::raid0) {
    return fail(EINVAL, "RAID0 keeps no redundancy: there is nothing to scrub");
  }
  if (const unsigned missing = volume_->missing_members(); missing > 0) {
    return fail(EAGAIN, "a scrub needs every member; {} out of service (rebuild first)", missing);
  }
  std::lock_guard lock(scrub_mutex_);
  if (scrub_closing_) return fail(EBUSY, "the array is closing");
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
  scrub_.first = scrub_.done = from;
  scrub_.counts = so_far;
  scrub_stopping_ = false;
  scrub_keep_ = false;
  if (from == 0) {
    raid_log().info("array {}: scrub started{}", format_uuid(superblock().array_uuid),
                    repair ? " (repairing)" : "");
  } else {
    raid_log().info("array {}: scrub resumed at stripe {} of {}{}",
                    format_uuid(superblock().array_uuid), from, scrub_.total,
                    repair ? " (repairing)" : "");
  }
  scrub_thread_ = std::thread(
      [this, repair, from, checker = scrub_checker_] { scrub_loop(repair, checker, from); });
  return {};
}

void Array::record_scrub(uint64_t checkpoint, bool repair, const Volume::ScrubCounts& so_far,
                         bool finished) {
  std::lock_guard lock(mutex_);
  if (closed_) return;
  master_.scrub_checkpoint = checkpoint;
  const bool pending = checkpoint != kNoScrub;
  master_.scrub_flags = pending && repair ? Superblock::kScrubRepair : 0;
  master_.scrub_mismatched = pending ? so_far.mismatched : 0;
  master_.scrub_repaired = pending ? so_far.repaired : 0;
  master_.scrub_unrepairable = pending ? so_far.unrepairable : 0;
  if (finished) {
    master_.last_scrub = superblock_time();
    master_.last_scrub_mismatched = so_far.mismatched;
    master_.last_scrub_repaired = so_far.repaired;
    master_.last_scrub_unrepairable = so_far.unrepairable;
  }
  ++master_.events;
  if (auto w = write_superblocks(); !w) {
    raid_log().error("array {}: recording the scrub: {}", format_uuid(master_.array_uuid),
                     w.error().message);
  }
}

void Array::scrub_loop(bool repair, ScrubChecker* checker, uint64_t from) {
  const Geometry& g = volume_->geometry();
  const uint64_t stripes = g.stripes();
  const auto started = std::chrono::steady_clock::now();
  auto checkpointed = started;
  Pacing pacing = start_pacing();
  Result<void> status;
  bool stopped = false;
  Volume::ScrubCounts so_far;
  {
    std::lock_guard lock(scrub_mutex_);
    so_far = scrub_.counts;
  }
  record_scrub(from, repair, so_far, false);  // a crash from here on resumes it
  Volume::ScrubBuffers buffers;               // the rounds' reads, allocated once
  // The checker reads the filesystem's metadata through the Volume: the scrub's own reads,
  // which must not make an idle array look busy to the pacing.
  if (checker != nullptr) {
    const uint64_t before = user_ios();
    status = checker->begin(scrub_stopping_);
    discount_own_ios(pacing, before);
  }
  for (uint64_t stripe = from; stripe < stripes && status;) {
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
      const uint64_t before = user_ios();
      auto made =
          checker->batch(stripe * g.stripe_data_size(), (stripe + count) * g.stripe_data_size());
      discount_own_ios(pacing, before);
      if (made) {
        batch = std::move(*made);
      } else {
        status = fail(made.error().code, "checksums of volume bytes from {}: {}",
                      stripe * g.stripe_data_size(), made.error().message);
      }
    }
    if (status) {
      status = volume_->scrub_stripes(stripe, count, repair, found, batch.get(), &buffers);
    }
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
    if (std::chrono::steady_clock::now() - checkpointed >= kScrubCheckpointEvery) {
      {
        std::lock_guard lock(scrub_mutex_);
        so_far = scrub_.counts;
      }
      record_scrub(stripe, repair, so_far, false);
      checkpointed = std::chrono::steady_clock::now();
    }
    pace(pacing, count * g.chunk_size(), &scrub_stopping_);
  }
  if (checker != nullptr) checker->end();
  ScrubProgress ended;
  {
    std::lock_guard lock(scrub_mutex_);
    ended = scrub_;
  }
  ended.running = false;
  ended.stopped = stopped;
  if (!status) ended.error = status.error();
  ended.ended = std::chrono::system_clock::now();
  // A close's stop keeps the checkpoint for the next open; a stop on request, a failure or
  // the end clears it, and the end records itself. Recorded before anyone waiting hears.
  const bool finished = status && !stopped;
  record_scrub(stopped && scrub_keep_ ? ended.done : kNoScrub, repair, ended.counts, finished);
  {
    std::lock_guard lock(scrub_mutex_);
    scrub_ = ended;
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
  halt_scrub(false);
}

void Array::close_scrub() {
  {
    std::lock_guard lock(scrub_mutex_);
    scrub_closing_ = true;  // nothing starts after this (a resync's end, say)
  }
  halt_scrub(true);
}

void Array::halt_scrub(bool keep) {
  std::thread thread;
  {
    std::lock_guard lock(scrub_mutex_);
    // A stop on request wins over a close's that follows it: that scrub is not resumed.
    scrub_keep_ = scrub_stopping_ ? scrub_keep_ && keep : keep;
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
  halt_scrub(true);  // one started before has the old checker; resume_scrub() goes on
}

ScrubProgress Array::scrub_progress() const {
  Superblock recorded;
  {
    std::lock_guard master(mutex_);  // alone: never under scrub_mutex_
    recorded = master_;
  }
  std::lock_guard lock(scrub_mutex_);
  if (scrub_.running || scrub_.ended || recorded.last_scrub == 0) return scrub_;
  ScrubProgress last;
  last.before_mount = true;
  last.total = last.done = volume_->geometry().stripes();
  last.ended =
      std::chrono::system_clock::from_time_t(static_cast<std::time_t>(recorded.last_scrub));
  last.counts.mismatched = recorded.last_scrub_mismatched;
  last.counts.repaired = recorded.last_scrub_repaired;
  last.counts.unrepairable = recorded.last_scrub_unrepairable;
  return last;
}

ScrubProgress Array::wait_scrub() {
  std::unique_lock lock(scrub_mutex_);
  scrub_cv_.wait(lock, [this] { return !scrub_.running; });
  return scrub_;
}

}  // namespace stripefs
