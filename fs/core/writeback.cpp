// Writeback, the filesystem's side: when a file's dirty data goes (a full stripe dirty, data
// older than the writeback delay, the cache over its size, fsync and sync), the plan
// (writeback_plan.hpp) handed to the submitter, and the completion that settles its extents
// and takes its ranges out of the cache.
#include <algorithm>

#include "fs/core/filesystem.hpp"
#include "fs/core/fs_log.hpp"

namespace stripefs::fs {

// Writers wait while the cache is over its size, and its dirty data is forced out. On
// parity levels, while other writebacks are in flight and the dirty data is at most half
// the cache, each file's last partial stripe stays: that is a stream's tail, which its next
// write completes into a full stripe (maybe_full_stripe_writeback). Forced out, it was a
// partial stripe: preread, logged, its parity computed again. Four writers of 1 MiB blocks
// with a 32 MiB cache wrote 60-95 % of their bytes so, at 117-229 MiB/s (now 99.5 % go as
// full stripes, at 1,079-1,376 MiB/s: README, session 34). More dirty data than that is
// no longer a few tails (many small files): all of it goes, beside what is in flight.
void Filesystem::throttle(Lock& lock) {
  const uint64_t stripe = uint64_t{sb_.stripe_blocks} * kBlockSize;
  while (cached_bytes_ > options_.cache_bytes && !failed_) {
    bool in_flight = false;
    uint64_t dirty = 0;
    for (auto& [ino, inode] : *table_) {
      in_flight = in_flight || inode->writebacks > 0;
      dirty += inode->cache.dirty_bytes();
    }
    const bool keep_tails =
        in_flight && dirty <= options_.cache_bytes / 2 && volume_.geometry().has_parity();
    for (auto& [ino, inode] : *table_) {
      if (inode->cache.dirty_bytes() == 0) continue;
      const uint64_t end = keep_tails ? inode->cache.end() / stripe * stripe : UINT64_MAX;
      if (end > 0) (void)start_writeback(*inode, 0, end, lock);
    }
    writeback_cv_.wait_for(lock, std::chrono::milliseconds(100));
  }
}

// Streaming writes go out as soon as whole stripes of the file are dirty.
void Filesystem::maybe_full_stripe_writeback(Inode& inode, uint64_t offset, uint64_t end,
                                             Lock& lock) {
  const uint64_t stripe = uint64_t{sb_.stripe_blocks} * kBlockSize;
  auto run = inode.cache.dirty_run_around(offset, end, 2 * stripe);
  if (!run) return;
  const auto [lo, hi] = *run;
  const uint64_t a = (lo + stripe - 1) / stripe * stripe, b = hi / stripe * stripe;
  if (a < b) {
    ++stats_.full_stripe_writebacks;
    (void)start_writeback(inode, a, b, lock);
  }
}

Result<void> Filesystem::start_writeback(Inode& inode, uint64_t offset, uint64_t end, Lock& lock) {
  (void)lock;
  if (inode.cache.dirty_bytes() == 0 || failed_ || draining_) return {};
  if (auto r = load_extents(inode); !r) return r;
  const WritebackSpace space{[this](uint64_t want, uint64_t goal, uint64_t align) {
                               return blocks_->reserve(want, goal, align);
                             },
                             sb_.stripe_blocks, step_blocks(), sb_.has_checksums(),
                             std::max<uint64_t>(1, journal_->capacity_blocks() / 8)};
  WritebackPlan plan = plan_writeback(next_job_++, inode.ino, offset, end, inode.cache,
                                      inode.extents, inode.inflight, inode.delalloc, space);
  delalloc_reserved_ -= plan.promised_released;
  if (plan.deferred) inode.writeback_deferred = true;
  // Reservations make this impossible; if it happens anyway, say so and stop writing rather
  // than drop data.
  if (plan.failed) fail_filesystem(*plan.failed);
  if (!plan.job) return {};
  std::shared_ptr<WritebackJob> job = std::move(plan.job);
  for (auto [first, end] : job->allocated) inode.pending_blocks += end - first;
  ++inode.writebacks;
  ++stats_.writebacks;
  stats_.writeback_bytes += job->bytes;
  // The submitter hands it to the Volume; the completion, which may run on an I/O thread,
  // only queues work for the worker.
  // (A copy of the pieces: the completion takes the data's checksums from them.)
  std::vector<VolumePiece> pieces;
  if (sb_.has_checksums()) {
    pieces = job->pieces;
  } else {
    pieces = std::move(job->pieces);
  }
  submitter_.submit(std::move(pieces), [this, job](Result<void> result) {
    post([this, job, result = std::move(result)]() mutable {
      writeback_done(job, std::move(result));
    });
  });
  return {};
}

// Data of [first, end) reached the volume: its extents become ordinary written extents, and
// blocks they replaced (copy on write) are freed.
void Filesystem::settle_extents(Inode& inode, uint64_t first, uint64_t end, bool written) {
  const Settled settled = inode.extents.settle(first, end, written);
  for (auto [physical, length] : settled.used) {
    blocks_->mark_used(*meta_, physical, length);
    inode.disk.blocks += length;
  }
  for (auto [physical, length] : settled.replaced) {
    free_blocks(physical, length);
    inode.disk.blocks -= length;
  }
  inode.extents_dirty = true;
  table_->mark_dirty(inode.ino);
  dirty(inode);
}

void Filesystem::writeback_done(std::shared_ptr<WritebackJob> job, Result<void> result) {
  // The checksums of what was written, from the job's buffers (which never change), before
  // the lock is taken.
  std::vector<std::pair<uint64_t, uint32_t>> checksums;
  if (result && sb_.has_checksums()) checksums = data_checksums(job->pieces);
  Lock lock(mutex_);
  Inode* found = table_->find(job->ino);
  if (found == nullptr) return;  // never: inodes with writebacks stay cached
  Inode& inode = *found;
  // In the same transaction as the extents that point at the blocks: a commit never holds
  // one without the other.
  if (result && sb_.has_checksums()) result = store_checksums(checksums);
  for (auto [first, end] : job->allocated) inode.pending_blocks -= end - first;
  if (result) {
    for (auto [first, end] : job->allocated) settle_extents(inode, first, end, true);
    for (auto [first, end] : job->converted) settle_extents(inode, first, end, true);
  } else {
    // Beyond the array's redundancy: the data cannot be stored. Say so, and stop writing.
    fs_log().error("inode {}: writeback of [{}, {}) failed: {}", job->ino, job->begin,
                   job->end == UINT64_MAX ? inode.disk.size : job->end, result.error().message);
    fail_filesystem(result.error());
    // Its new blocks go back; blocks it was to replace are the file's again (copy on write:
    // they still hold what a read should find).
    for (auto [first, end] : job->allocated) {
      for (auto [physical, length] : inode.extents.abandon(first, end)) {
        blocks_->unreserve(physical, length);
      }
    }
  }
  // The job's ranges are clean now: they leave the cache (the kernel caches clean pages).
  inode.cache.release_job(job->id, job->begin, job->end);
  for (auto [first, end] : job->blocks) inode.inflight.remove(first, end);
  restore_size_later(inode);
  cached_bytes_ -= job->bytes;
  stats_.writeback_done_bytes += job->bytes;
  --inode.writebacks;
  if (inode.writeback_deferred && !failed_) {
    // Newer data waited for this job's blocks; its turn now.
    inode.writeback_deferred = false;
    (void)start_writeback(inode, 0, UINT64_MAX, lock);
  }
  writeback_cv_.notify_all();
  maybe_evict(inode, lock);
}

void Filesystem::wait_writeback(Inode& inode, Lock& lock) {
  const uint64_t ino = inode.ino;
  writeback_cv_.wait(lock, [&] {
    const Inode* found = table_->find(ino);
    return found == nullptr || found->writebacks == 0;
  });
}

Result<void> Filesystem::writeback_inode(Inode& inode, Lock& lock) {
  const uint64_t ino = inode.ino;
  if (auto r = start_writeback(inode, 0, UINT64_MAX, lock); !r) return r;
  wait_writeback(inode, lock);
  if (failed_) return fail(EIO, "inode {}: {}", ino, failed_->message);
  return {};
}

}  // namespace stripefs::fs
