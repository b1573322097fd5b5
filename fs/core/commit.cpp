// Commits, checkpoints, fsync and sync, and the background worker that runs completions
// and the timers.
#include <cstring>

#include "fs/core/filesystem.hpp"
#include "fs/core/fs_log.hpp"

namespace stripefs::fs {

void Filesystem::fail_filesystem(const Error& why) {
  if (failed_) return;
  failed_ = why;
  fs_log().error("filesystem is read-only from now on: {}", why.message);
}

Result<void> Filesystem::commit() {
  std::lock_guard commit_lock(commit_mutex_);
  MetaStore::Snapshot snapshot;
  std::string traced;  // with debug logging: the inodes stored, for tracing crash tests
  {
    Lock lock(mutex_);
    if (failed_) return fail(EIO, "{}", failed_->message);
    if (meta_->failed()) {
      fail_filesystem(*meta_->failed());
      return fail(EIO, "{}", failed_->message);
    }
    const std::vector<uint64_t> stored = table_->take_dirty();
    for (uint64_t ino : stored) {
      Inode* inode = table_->find(ino);
      if (inode == nullptr) continue;
      if (inode->dirty || inode->extents_dirty) {
        if (auto r = store_inode(*inode); !r) {
          for (uint64_t again : stored) table_->mark_dirty(again);  // not stored, still changed
          fail_filesystem(r.error());
          return r;
        }
        if (fs_log().should_log(spdlog::level::debug)) {
          traced += fmt::format(" {}:{}:{}", ino, inode->stored_size, inode->disk.nlink);
        }
      }
    }
    // Only what this program stored may go to the journal: an inode-table block whose slot
    // of an inode in memory holds other bytes (memory overwritten from elsewhere) fails the
    // filesystem rather than be committed over what was committed before.
    for (uint64_t block : meta_->dirty_in(table_->first_block(), table_->end_block())) {
      if (auto r = table_->check_slots(block); !r) {
        for (uint64_t again : stored) table_->mark_dirty(again);
        fail_filesystem(r.error());
        return r;
      }
    }
    // Stored now: those nobody refers to any more may leave the cache.
    for (uint64_t ino : stored) {
      if (Inode* inode = table_->find(ino)) maybe_evict(*inode, lock);
    }
    snapshot = meta_->take_snapshot();
  }
  auto sequence = meta_->write_snapshot(snapshot);
  Lock lock(mutex_);
  if (!sequence) {
    fail_filesystem(sequence.error());
    return fail(sequence.error());
  }
  meta_->committed(snapshot, *sequence);
  fs_log().debug("commit {} (transaction {}): {} blocks; inodes (number:size:links){}", *sequence,
                 snapshot.transaction, snapshot.blocks.size(), traced);
  return {};
}

Result<void> Filesystem::checkpoint() {
  uint64_t transaction = 0;
  {
    std::lock_guard commit_lock(commit_mutex_);
    auto done = meta_->checkpoint();
    if (!done) {
      Lock lock(mutex_);
      fail_filesystem(done.error());
      return fail(done.error());
    }
    transaction = *done;
  }
  Lock lock(mutex_);
  // Blocks freed up to `transaction` may be reused once reads that started before now,
  // which may still use the old mappings, are done.
  // At most kReadEpochSlots epochs may have reads in flight, so that no two share a slot:
  // with one read slow across that many checkpoints, the release waits for the reads of
  // the current epoch too (no new epoch is opened) rather than for an aliased slot that
  // steady reads would never let reach zero.
  releases_.emplace_back(epoch_, transaction);
  if (epoch_ + 1 - oldest_read_epoch_ < kReadEpochSlots) ++epoch_;
  releases_waiting_.store(true);
  release_checkpointed();
  return {};
}

// The lock for an operation that changes metadata. A running transaction that has grown to a
// quarter of the journal is committed first, so no transaction outgrows the journal.
Filesystem::Lock Filesystem::change_lock() {
  Lock lock(mutex_);
  (void)commit_while_large(lock);  // a failed commit fails the filesystem: checked later
  return lock;
}

Result<void> Filesystem::commit_while_large(Lock& lock) {
  // Dirty inodes count too: each may dirty its table block at commit.
  while (!failed_ &&
         meta_->dirty_blocks() + table_->dirty_count() > journal_->capacity_blocks() / 4) {
    lock.unlock();
    auto r = commit();
    if (r && meta_->checkpoint_due()) r = checkpoint();
    lock.lock();
    if (!r) return r;
  }
  if (failed_) return fail(EIO, "{}", failed_->message);
  return {};
}

Result<void> Filesystem::fsync(uint64_t ino, bool data_only) {
  (void)data_only;  // metadata commits are cheap next to a flush, and size changes need one
  {
    Lock lock(mutex_);
    auto found = get_inode(ino);
    if (!found) return fail(found.error());
    if (auto r = writeback_inode(**found, lock); !r) return r;
  }
  if (auto r = commit(); !r) return r;
  fs_log().debug("fsync inode {}: committed", ino);
  return {};
}

Result<void> Filesystem::sync() {
  {
    Lock lock(mutex_);
    for (auto& [ino, inode] : *table_) {
      if (auto r = start_writeback(*inode, 0, UINT64_MAX, lock); !r) return r;
    }
    writeback_cv_.wait(lock, [&] {
      for (auto& [ino, inode] : *table_) {
        if (inode->writebacks > 0) return false;
      }
      return true;
    });
    if (failed_) return fail(EIO, "{}", failed_->message);
  }
  if (auto r = commit(); !r) return r;
  return checkpoint();
}

// After each batch of completions, and at least every 200 ms (the worker's tick): writeback
// of data dirty for longer than the writeback delay, the periodic commit, and a checkpoint
// when the journal fills.
void Filesystem::tick() {
  const uint64_t t = monotonic_ns();
  size_t dirty_blocks = 0;
  {
    Lock lock(mutex_);
    dirty_blocks = meta_->dirty_blocks() + table_->dirty_count();
    meta_->trim();  // between operations: nothing holds a span into the cache
    const uint64_t delay = static_cast<uint64_t>(options_.writeback_delay_s * 1e9);
    for (auto& [ino, inode] : *table_) {
      if (inode->cache.dirty_bytes() == 0) continue;  // nothing to scan (all frozen, or clean)
      // Written back once its oldest dirty range is older than the delay.
      if (t >= delay && inode->cache.dirty_before(t - delay)) {
        (void)start_writeback(*inode, 0, UINT64_MAX, lock);
      }
    }
  }
  if (t - last_commit_ >= static_cast<uint64_t>(options_.commit_interval_s * 1e9) ||
      dirty_blocks > journal_->capacity_blocks() / 4) {
    last_commit_ = t;
    if (commit()) {
      if (meta_->checkpoint_due()) (void)checkpoint();
    }
  }
}

FsStats Filesystem::stats() const {
  std::lock_guard lock(mutex_);
  FsStats stats = stats_;
  stats.checksum_recovered = checksum_recovered_.load(std::memory_order_relaxed);
  stats.checksum_unrecoverable = checksum_unrecoverable_.load(std::memory_order_relaxed);
  return stats;
}

}  // namespace stripefs::fs
