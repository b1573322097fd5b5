// File data: the buffer cache, reads, writes, delayed allocation and writeback.
#include <fcntl.h>
#include <linux/falloc.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "fs/core/inode.hpp"

namespace stripefs::fs {

namespace {

uint64_t align_down(uint64_t v) {
  return v / kBlockSize * kBlockSize;
}
uint64_t align_up(uint64_t v) {
  return (v + kBlockSize - 1) / kBlockSize * kBlockSize;
}

// What a read of [begin, end) (block-aligned) needs: cached pieces and volume pieces; the
// rest reads as zeros.
struct ReadPlan {
  struct FromCache {
    uint64_t offset;
    uint64_t length;
    std::shared_ptr<AlignedBuffer> buffer;
    size_t buffer_offset;
  };
  struct FromVolume {
    uint64_t offset;
    uint64_t length;
    uint64_t volume_block;
  };
  std::vector<FromCache> cached;
  std::vector<FromVolume> volume;
};

// Reads `plan` into `dest` (block-aligned file range [begin, begin + dest.size())): zeros
// where neither the volume nor the cache supplies bytes, the cached bytes at once, the
// volume's from its completion, which then calls `done`.
void start_plan(Volume& volume, const ReadPlan& plan, uint64_t begin, std::span<std::byte> dest,
                Volume::Callback done) {
  std::vector<std::pair<uint64_t, uint64_t>> covered;
  for (const auto& v : plan.volume) covered.emplace_back(v.offset - begin, v.length);
  for (const auto& c : plan.cached) covered.emplace_back(c.offset - begin, c.length);
  std::sort(covered.begin(), covered.end());
  uint64_t at = 0;
  for (auto [offset, length] : covered) {
    if (offset > at) std::memset(dest.data() + at, 0, offset - at);
    at = std::max(at, offset + length);
  }
  if (at < dest.size()) std::memset(dest.data() + at, 0, dest.size() - at);
  // Cached and volume ranges never overlap, so the order of the copies does not matter.
  for (const auto& c : plan.cached) {
    std::memcpy(dest.data() + (c.offset - begin), c.buffer->data() + c.buffer_offset, c.length);
  }
  if (plan.volume.empty()) return done({});
  std::vector<VolumePiece> pieces;
  pieces.reserve(plan.volume.size());
  for (const auto& v : plan.volume) {
    pieces.push_back({v.volume_block * kBlockSize, dest.subspan(v.offset - begin, v.length)});
  }
  volume.read(std::move(pieces), std::move(done));
}

Result<void> run_plan(Volume& volume, const ReadPlan& plan, uint64_t begin,
                      std::span<std::byte> dest) {
  return wait_for<Result<void>>(
      [&](Volume::Callback done) { start_plan(volume, plan, begin, dest, std::move(done)); });
}

}  // namespace

struct Filesystem::WritebackJob {
  uint64_t id = 0;
  uint64_t ino = 0;
  std::vector<std::pair<uint64_t, uint64_t>> blocks;  // file blocks it writes
  uint64_t begin = 0, end = 0;                        // the file range it covers
  std::vector<std::shared_ptr<AlignedBuffer>> buffers;
  uint64_t bytes = 0;
  std::vector<std::pair<uint64_t, uint64_t>> allocated;  // file blocks [first, end), pending
  std::vector<std::pair<uint64_t, uint64_t>> converted;  // unwritten → written
  bool full_stripes = false;
};

// ---------------------------------------------------------------- the cache map

void Filesystem::drop_ranges(Inode& inode, uint64_t offset, uint64_t end, bool release) {
  for (auto [a, b] : inode.cache.drop(offset, end)) {
    cached_bytes_ -= b - a;
    // Dirty bytes that will never be written: their unallocated blocks' promise goes too.
    if (release) delalloc_reserved_ -= inode.delalloc.remove(a / kBlockSize, b / kBlockSize);
  }
  restore_size_later(inode);
}

void Filesystem::insert_range(Inode& inode, uint64_t offset, uint64_t length,
                              std::shared_ptr<AlignedBuffer> buffer, size_t buffer_offset) {
  for (auto [a, b] :
       inode.cache.insert(offset, length, std::move(buffer), buffer_offset, monotonic_ns())) {
    cached_bytes_ -= b - a;
  }
  cached_bytes_ += length;
  restore_size_later(inode);
}

// Space for `blocks` more blocks of data: what is free, less what is promised and the
// metadata reserve. Space freed by unlinks waits for a checkpoint: force one when short.
Result<void> Filesystem::ensure_space(uint64_t blocks, Lock& lock) {
  if (blocks == 0) return {};  // overwrites of blocks the file owns need nothing
  std::optional<std::chrono::steady_clock::time_point> deadline;
  for (int attempt = 0;; ++attempt) {
    if (blocks_->free_count() >= blocks + delalloc_reserved_ + metadata_reserve_) return {};
    if (attempt > 0 && !releases_.empty()) {
      // Checkpointed frees still held back by reads that began before the checkpoint:
      // those take microseconds, so wait for them (a second at most) rather than fail.
      const auto now = std::chrono::steady_clock::now();
      if (!deadline) deadline = now + std::chrono::seconds(1);
      if (now < *deadline) {
        lock.unlock();
        std::this_thread::sleep_for(std::chrono::microseconds(100));
        lock.lock();
        release_checkpointed();
        continue;
      }
    }
    if (attempt > 0 || blocks_->deferred_count() == 0) {
      return fail(ENOSPC, "no space left on the filesystem");
    }
    lock.unlock();
    auto r = commit();
    if (r) r = checkpoint();
    lock.lock();
    if (!r) return r;
  }
}

// Delayed allocation promises the blocks at write() time, so writeback cannot meet ENOSPC
// after the write was acknowledged.
Result<void> Filesystem::reserve_delalloc(Inode& inode, uint64_t offset, uint64_t end, Lock& lock) {
  const uint64_t first = offset / kBlockSize, last = end / kBlockSize;
  auto needed = [&] {
    uint64_t need = 0;
    inode.extents.for_each_hole(
        first, last, [&](uint64_t a, uint64_t b) { need += (b - a) - inode.delalloc.count(a, b); });
    return need;
  };
  if (auto r = ensure_space(needed(), lock); !r) return r;
  // The lock may have been dropped: promise what is unmapped now, and check it still fits.
  const uint64_t need = needed();
  if (need == 0) return {};
  if (blocks_->free_count() < need + delalloc_reserved_ + metadata_reserve_) {
    return fail(ENOSPC, "no space left on the filesystem");
  }
  inode.extents.for_each_hole(
      first, last, [&](uint64_t a, uint64_t b) { delalloc_reserved_ += inode.delalloc.add(a, b); });
  return {};
}

void Filesystem::throttle(Lock& lock) {
  while (cached_bytes_ > options_.cache_bytes && !failed_) {
    for (auto& [ino, inode] : inode_cache_) {
      if (inode->cache.dirty_bytes() > 0) (void)start_writeback(*inode, 0, UINT64_MAX, lock);
    }
    writeback_cv_.wait_for(lock, std::chrono::milliseconds(100));
  }
}

// ---------------------------------------------------------------- read

namespace {
// For plan_read: the volume block holding file block b (0: reads as zeros) and how many
// blocks from b share that answer.
template <class Inode>
auto readable_run(Inode& inode) {
  return [&inode](uint64_t b) { return inode.extents.readable_run(b); };
}

// Plans [begin, end) of `inode` from its cache and extents.
template <class Inode, class Map>
ReadPlan plan_read(Inode& inode, uint64_t begin, uint64_t end, Map map) {
  ReadPlan plan;
  auto plan_uncached = [&](uint64_t from, uint64_t to) {
    for (uint64_t b = from / kBlockSize; b < to / kBlockSize;) {
      auto e = map(b);  // {volume block or 0, blocks in this run}
      const uint64_t n = std::min<uint64_t>(e.second, to / kBlockSize - b);
      if (e.first != 0) {
        if (!plan.volume.empty() &&
            plan.volume.back().offset + plan.volume.back().length == b * kBlockSize &&
            plan.volume.back().volume_block + plan.volume.back().length / kBlockSize == e.first) {
          plan.volume.back().length += n * kBlockSize;
        } else {
          plan.volume.push_back({b * kBlockSize, n * kBlockSize, e.first});
        }
      }
      b += n;
    }
  };
  inode.cache.split(
      begin, end,
      [&](uint64_t start, uint64_t length, const CachedRange& range, uint64_t into) {
        plan.cached.push_back({start, length, range.buffer, range.buffer_offset + into});
      },
      plan_uncached);
  return plan;
}
}  // namespace

void Filesystem::read(uint64_t ino, uint64_t offset, size_t size, ReadDone done) {
  Lock lock(mutex_);
  auto inode = get_inode(ino);
  if (!inode) return lock.unlock(), done(fail(inode.error()));
  Inode& n = **inode;
  if (n.is_dir()) return lock.unlock(), done(fail(EISDIR, "is a directory"));
  if (auto r = load_extents(n); !r) return lock.unlock(), done(fail(r.error()));
  ReadReply reply;
  if (offset >= n.disk.size || size == 0) return lock.unlock(), done(std::move(reply));
  size = std::min<uint64_t>(size, n.disk.size - offset);
  const uint64_t begin = align_down(offset), end = align_up(offset + size);

  // A hit in one cached range is answered straight from its buffer.
  if (auto hit = n.cache.covering(offset, size)) {
    const auto& [start, range] = *hit;
    reply.buffers.push_back(range->buffer);
    reply.fragments.push_back(
        {range->buffer->data() + range->buffer_offset + (offset - start), size});
    lock.unlock();
    return done(std::move(reply));
  }
  const ReadPlan plan = plan_read(n, begin, end, readable_run(n));
  const uint64_t epoch = start_read_locked();
  lock.unlock();
  auto buffer = buffers_->get(end - begin);
  reply.buffers.push_back(buffer);
  reply.fragments.push_back({buffer->data() + (offset - begin), size});
  start_plan(volume_, plan, begin, buffer->span(),
             [this, epoch, ino, offset, reply = std::move(reply),
              done = std::move(done)](Result<void> r) mutable {
               // The reply first: wait_reads() then covers it too.
               if (!r) {
                 fs_log().error("inode {}: read at {}: {}", ino, offset, r.error().message);
                 done(fail(EIO, "{}", r.error().message));
               } else {
                 done(std::move(reply));
               }
               finish_read(epoch);
             });
}

Result<ReadReply> Filesystem::read(uint64_t ino, uint64_t offset, size_t size) {
  return wait_for<Result<ReadReply>>(
      [&](ReadDone done) { read(ino, offset, size, std::move(done)); });
}

// Used once the FUSE loop has ended: what is left are replies on their way out.
void Filesystem::wait_reads() {
  auto in_flight = [&] {
    for (const auto& count : reads_in_flight_) {
      if (count.load() != 0) return true;
    }
    return false;
  };
  while (in_flight() || reads_finishing_.load() != 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

uint64_t Filesystem::start_read_locked() {
  reads_finishing_.fetch_add(1);
  reads_in_flight_[epoch_ % kReadEpochSlots].fetch_add(1);
  return epoch_;
}

// Runs on the volume's completion, perhaps while another thread holds mutex_ and waits for
// I/O this very thread must complete: so mutex_ is only tried, never waited for. Frees this
// read held back are released then, or by the next checkpoint. (Both sides use sequential
// consistency: either checkpoint() sees this read gone, or this read sees its release.)
void Filesystem::finish_read(uint64_t epoch) {
  reads_in_flight_[epoch % kReadEpochSlots].fetch_sub(1);
  if (releases_waiting_.load() && mutex_.try_lock()) {
    release_checkpointed();
    mutex_.unlock();
  }
  reads_finishing_.fetch_sub(1);  // the last touch: wait_reads() may free this next
}

// With mutex_: frees covered by a checkpoint become reusable once no read older than it is
// in flight. Reads in flight are of epochs oldest_read_epoch_ .. epoch_, at most
// kReadEpochSlots of them (checkpoint() keeps it so), each in its own slot.
void Filesystem::release_checkpointed() {
  while (!releases_.empty()) {
    const uint64_t release_epoch = releases_.front().first;
    const uint64_t span = release_epoch + 1 - oldest_read_epoch_;
    for (uint64_t i = 0; i < std::min<uint64_t>(span, kReadEpochSlots); ++i) {
      if (reads_in_flight_[(oldest_read_epoch_ + i) % kReadEpochSlots].load() != 0) return;
    }
    blocks_->checkpointed(releases_.front().second);
    inodes_->checkpointed(releases_.front().second);
    releases_.pop_front();
    oldest_read_epoch_ = std::min(release_epoch + 1, epoch_);  // epoch_ may still get reads
    releases_waiting_.store(!releases_.empty());
  }
}

// Current contents of block-aligned [offset, offset + dest.size()), under the lock.
Result<void> Filesystem::fill_from_volume(Inode& inode, uint64_t offset, std::span<std::byte> dest,
                                          Lock& lock) {
  (void)lock;  // held throughout: the edges of a write must not change under it
  ReadPlan plan = plan_read(inode, offset, offset + dest.size(), readable_run(inode));
  stats_.edge_fill_bytes += dest.size();
  return run_plan(volume_, plan, offset, dest);
}

// ---------------------------------------------------------------- write

// The checks every write makes, then back-pressure (which waits without the lock: callers
// look the inode up again). False for an empty write.
Result<bool> Filesystem::start_write(uint64_t ino, uint64_t offset, size_t size, Lock& lock) {
  if (auto r = check_writable(); !r) return fail(r.error());
  auto found = get_inode(ino);
  if (!found) return fail(found.error());
  if ((*found)->is_dir()) return fail(EISDIR, "is a directory");
  if (offset + size < offset || offset + size > kMaxFileSize) {
    return fail(EFBIG, "write past the largest possible file");
  }
  if (size == 0) return false;
  if (auto r = load_extents(**found); !r) return fail(r.error());
  throttle(lock);
  return true;
}

// Space for blocks [begin, end), reserved once no operation runs in steps on the inode (a
// truncate's steps would free what this write's writeback allocates); reserve_delalloc may
// drop the lock, so the check is made again after it.
Result<void> Filesystem::admit_write(Inode& inode, uint64_t begin, uint64_t end, Lock& lock) {
  do {
    wait_in_steps(inode, lock);
    if (auto r = reserve_delalloc(inode, begin, end, lock); !r) return r;
  } while (inode.in_steps);
  return {};
}

// The written blocks [begin, begin + length) join the cache; the file grows to `file_end`.
void Filesystem::place_write(Inode& inode, uint64_t begin, uint64_t length,
                             std::shared_ptr<AlignedBuffer> buffer, size_t buffer_offset,
                             uint64_t file_end, Lock& lock) {
  insert_range(inode, begin, length, std::move(buffer), buffer_offset);
  if (file_end > inode.disk.size) inode.disk.size = file_end;
  inode.disk.mtime = inode.disk.ctime = now();
  dirty(inode);
  maybe_full_stripe_writeback(inode, begin, begin + length, lock);
}

Result<size_t> Filesystem::write(uint64_t ino, uint64_t offset, size_t size, const CopyIn& copy) {
  Lock lock = change_lock();
  auto started = start_write(ino, offset, size, lock);
  if (!started) return fail(started.error());
  if (!*started) return 0;
  const uint64_t begin = align_down(offset), end = align_up(offset + size);
  auto buffer = buffers_->get(end - begin);
  // The one copy of the payload, outside the lock.
  lock.unlock();
  auto copied = copy(buffer->span().subspan(offset - begin, size));
  lock.lock();
  if (!copied) return fail(copied.error());
  auto again = get_inode(ino);  // the inode may have gone while unlocked? (never: it is open)
  if (!again) return fail(again.error());
  Inode& n = **again;
  if (auto r = admit_write(n, begin, end, lock); !r) return fail(r.error());
  // Partially written first and last blocks take the rest of their bytes from the file.
  const uint64_t stop = offset + size;
  AlignedBuffer edge(kBlockSize);
  if (offset > begin) {
    if (auto r = fill_from_volume(n, begin, edge.span(), lock); !r)
      return fail(EIO, "{}", r.error().message);
    std::memcpy(buffer->data(), edge.data(), offset - begin);
    if (end - begin == kBlockSize && stop < end) {
      std::memcpy(buffer->data() + (stop - begin), edge.data() + (stop - begin), end - stop);
    }
  }
  if (stop < end && (end - begin > kBlockSize || offset == begin)) {
    if (auto r = fill_from_volume(n, end - kBlockSize, edge.span(), lock); !r) {
      return fail(EIO, "{}", r.error().message);
    }
    const size_t keep = end - stop;
    std::memcpy(buffer->data() + (end - begin) - keep, edge.data() + kBlockSize - keep, keep);
  }
  stats_.bytes_copied_in += size;
  place_write(n, begin, end - begin, std::move(buffer), 0, offset + size, lock);
  return size;
}

Result<size_t> Filesystem::write_shared(uint64_t ino, uint64_t offset, size_t size,
                                        std::shared_ptr<AlignedBuffer> buffer,
                                        size_t buffer_offset) {
  if (offset % kBlockSize != 0 || size % kBlockSize != 0 || !buffer ||
      buffer_offset + size > buffer->size()) {
    return fail(EINVAL, "shared write at {} of {} bytes: not whole blocks of the buffer", offset,
                size);
  }
  Lock lock = change_lock();
  auto started = start_write(ino, offset, size, lock);
  if (!started) return fail(started.error());
  if (!*started) return 0;
  auto again = get_inode(ino);  // still cached: it is open
  if (!again) return fail(again.error());
  Inode& n = **again;
  if (auto r = admit_write(n, offset, offset + size, lock); !r) return fail(r.error());
  stats_.bytes_shared += size;
  place_write(n, offset, size, std::move(buffer), buffer_offset, offset + size, lock);
  return size;
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

// ---------------------------------------------------------------- writeback

Result<void> Filesystem::start_writeback(Inode& inode, uint64_t offset, uint64_t end, Lock& lock) {
  (void)lock;
  if (inode.cache.dirty_bytes() == 0 || failed_ || draining_) return {};
  if (auto r = load_extents(inode); !r) return r;
  auto job = std::make_shared<WritebackJob>();
  job->id = next_job_++;
  job->ino = inode.ino;
  job->begin = offset;
  job->end = end;
  std::vector<VolumePiece> pieces;
  const uint64_t stripe = sb_.stripe_blocks;
  // Exactly [offset, end) goes.
  job->bytes = inode.cache.freeze(offset, end, job->id, [&](uint64_t start, const CachedRange& r) {
    const uint64_t first = start / kBlockSize;
    const uint64_t stop = (start + r.length) / kBlockSize;
    if (inode.inflight.overlaps(first, stop)) {
      inode.writeback_deferred = true;  // goes when the job writing these blocks is done
      return FileCache::Freeze::skip;
    }
    for (uint64_t b = first; b < stop;) {
      // The extent covering b, or the hole up to the next one.
      const ExtentMap::At here = inode.extents.at(b);
      uint64_t run = 0, volume_block = 0;
      if (here.extent != nullptr) {
        const Extent& x = here.extent->extent;
        run = std::min(stop, x.logical_end()) - b;
        volume_block = x.physical + (b - x.logical);
        if (x.unwritten) job->converted.emplace_back(b, b + run);
      } else {
        const uint64_t hole_end = std::min(stop, here.next);
        uint64_t goal = 0;
        if (here.previous != nullptr && here.previous->extent.logical_end() == b) {
          goal = here.previous->extent.physical + here.previous->extent.length;
        }
        const uint64_t want = std::min<uint64_t>({hole_end - b, kMaxExtentLength, step_blocks()});
        auto got = blocks_->reserve(want, goal, b % stripe == 0 ? stripe : 1);
        if (!got) {
          // Reservations make this impossible; if it happens anyway, say so and stop writing
          // rather than drop data.
          fail_filesystem(Error{ENOSPC, fmt::format("inode {}: writeback found no space for "
                                                    "reserved data",
                                                    inode.ino)});
          break;
        }
        delalloc_reserved_ -= inode.delalloc.remove(b, b + got->second);
        run = got->second;
        volume_block = got->first;
        inode.extents.add(
            MemExtent{Extent{b, got->first, static_cast<uint32_t>(run), false}, true});
        job->allocated.emplace_back(b, b + run);
      }
      const size_t at = r.buffer_offset + (b * kBlockSize - start);
      pieces.push_back({volume_block * kBlockSize, r.buffer->span().subspan(at, run * kBlockSize)});
      b += run;
    }
    inode.inflight.add(first, stop);
    job->blocks.emplace_back(first, stop);
    job->buffers.push_back(r.buffer);
    return FileCache::Freeze::take;
  });
  if (pieces.empty()) return {};
  std::sort(pieces.begin(), pieces.end(),
            [](const VolumePiece& a, const VolumePiece& b) { return a.offset < b.offset; });
  ++inode.writebacks;
  ++stats_.writebacks;
  stats_.writeback_bytes += job->bytes;
  // The submitter hands it to the Volume; the completion, which may run on an I/O thread,
  // only queues work for the worker.
  {
    std::lock_guard submit_lock(submit_mutex_);
    submits_.push_back([this, job, pieces = std::move(pieces)]() mutable {
      volume_.write(std::move(pieces), [this, job](Result<void> result) {
        post([this, job, result = std::move(result)]() mutable {
          writeback_done(job, std::move(result));
        });
      });
    });
  }
  submit_cv_.notify_one();
  return {};
}

// Data of [first, end) reached the volume: its extents become ordinary written extents.
void Filesystem::settle_extents(Inode& inode, uint64_t first, uint64_t end, bool written) {
  for (auto [physical, length] : inode.extents.settle(first, end, written)) {
    blocks_->mark_used(*meta_, physical, length);
    inode.disk.blocks += length;
  }
  inode.extents_dirty = true;
  dirty_inodes_.insert(inode.ino);
  dirty(inode);
}

void Filesystem::writeback_done(std::shared_ptr<WritebackJob> job, Result<void> result) {
  Lock lock(mutex_);
  auto found = inode_cache_.find(job->ino);
  if (found == inode_cache_.end()) return;  // never: inodes with writebacks stay cached
  Inode& inode = *found->second;
  if (result) {
    for (auto [first, end] : job->allocated) settle_extents(inode, first, end, true);
    for (auto [first, end] : job->converted) settle_extents(inode, first, end, true);
  } else {
    // Beyond the array's redundancy: the data cannot be stored. Say so, and stop writing.
    fs_log().error("inode {}: writeback of [{}, {}) failed: {}", job->ino, job->begin,
                   job->end == UINT64_MAX ? inode.disk.size : job->end, result.error().message);
    fail_filesystem(result.error());
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
    auto it = inode_cache_.find(ino);
    return it == inode_cache_.end() || it->second->writebacks == 0;
  });
}

Result<void> Filesystem::writeback_inode(Inode& inode, Lock& lock) {
  const uint64_t ino = inode.ino;
  if (auto r = start_writeback(inode, 0, UINT64_MAX, lock); !r) return r;
  wait_writeback(inode, lock);
  if (failed_) return fail(EIO, "inode {}: {}", ino, failed_->message);
  return {};
}

// ---------------------------------------------------------------- size and space

// Zeros [offset, end) of the file in the cache (block edges filled from the file).
Result<std::shared_ptr<AlignedBuffer>> Filesystem::zero_range_in_cache(Inode& inode,
                                                                       uint64_t offset,
                                                                       uint64_t end, Lock& lock) {
  const uint64_t begin = align_down(offset), stop = align_up(end);
  // Reserved first, as write() does: reserve_delalloc may drop the lock, and a write landing
  // meanwhile must not be overwritten by edges read before it.
  if (auto r = reserve_delalloc(inode, begin, stop, lock); !r) return fail(r.error());
  auto buffer = buffers_->get(stop - begin);
  if (auto r = fill_from_volume(inode, begin, buffer->span(), lock); !r) return fail(r.error());
  std::memset(buffer->data() + (offset - begin), 0, end - offset);
  insert_range(inode, begin, stop - begin, buffer, 0);
  return buffer;
}

Result<void> Filesystem::truncate(Inode& inode, uint64_t size, Lock& lock) {
  wait_in_steps(inode, lock);
  if (auto r = load_extents(inode); !r) return r;
  if (size < inode.disk.size) {
    wait_writeback(inode, lock);
    drop_ranges(inode, align_up(size), UINT64_MAX);
    // The new size goes in the first step's transaction: past it, a crash between steps
    // leaves only blocks that the scan after an unclean mount frees.
    inode.disk.size = size;
    inode.stored_size = std::min(inode.stored_size, size);  // data past it is new data
    dirty(inode);
    if (auto r = free_range_in_steps(inode, align_up(size) / kBlockSize, UINT64_MAX, lock); !r)
      return r;
    // The bytes past the new end in its last block must read as zeros if the file grows.
    if (size % kBlockSize != 0) {
      auto mapped = map_block(inode, size / kBlockSize);
      const bool cached = inode.cache.end() > size;
      if ((mapped && *mapped != 0) || cached) {
        if (auto r = zero_range_in_cache(inode, size, align_up(size), lock); !r) {
          return fail(r.error());
        }
      }
    }
  }
  inode.disk.size = size;
  inode.disk.mtime = inode.disk.ctime = now();
  dirty(inode);
  return {};
}

Result<void> Filesystem::fallocate(uint64_t ino, int mode, uint64_t offset, uint64_t length) {
  Lock lock = change_lock();
  if (auto r = check_writable(); !r) return r;
  auto found = get_inode(ino);
  if (!found) return fail(found.error());
  Inode& n = **found;
  if (!n.is_reg()) return fail(n.is_dir() ? EISDIR : ENODEV, "not a regular file");
  if (length == 0 || offset + length < offset) return fail(EINVAL, "bad range");
  wait_in_steps(n, lock);
  const int known = FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE;
  if ((mode & ~known) != 0) return fail(EOPNOTSUPP, "fallocate mode {:#x}", mode);
  if ((mode & FALLOC_FL_PUNCH_HOLE) && !(mode & FALLOC_FL_KEEP_SIZE)) {
    return fail(EOPNOTSUPP, "PUNCH_HOLE needs KEEP_SIZE");
  }
  if (auto r = load_extents(n); !r) return r;
  const uint64_t end = offset + length;
  // Settle the cache over the range first: what remains is only the extent map.
  if (auto r = start_writeback(n, align_down(offset), align_up(end), lock); !r) return r;
  wait_writeback(n, lock);
  const bool punch = (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)) != 0;
  if (punch) {
    const uint64_t clip = std::min(end, std::max(n.disk.size, end));
    const uint64_t first = align_up(offset) / kBlockSize, last = clip / kBlockSize;
    if (first < last) {
      drop_ranges(n, first * kBlockSize, last * kBlockSize);
      if (auto r = free_range_in_steps(n, first, last, lock); !r) return r;
    }
    // Partial blocks at the edges are zeroed through the cache.
    if (offset % kBlockSize != 0) {
      const uint64_t stop = std::min(align_up(offset), end);
      if (auto r = zero_range_in_cache(n, offset, stop, lock); !r) return fail(r.error());
    }
    if (end % kBlockSize != 0 && align_down(end) >= align_up(offset)) {
      if (auto r = zero_range_in_cache(n, align_down(end), end, lock); !r) return fail(r.error());
    }
  }
  if (!(mode & FALLOC_FL_PUNCH_HOLE)) {
    // Allocate the holes as unwritten extents: reserved space that reads as zeros. In
    // steps of at most step_blocks(), committed in between once the transaction is large (a
    // crash between steps leaves unwritten extents: a preallocation, consistent).
    InSteps steps(*this, n, lock);
    for (uint64_t b = offset / kBlockSize; b < align_up(end) / kBlockSize;) {
      auto mapped = map_block(n, b);
      if (!mapped) return fail(mapped.error());
      if (*mapped != 0) {
        ++b;
        continue;
      }
      const uint64_t hole_end = std::min(align_up(end) / kBlockSize, n.extents.at(b).next);
      const uint64_t want = std::min<uint64_t>(hole_end - b, kMaxExtentLength);
      // Blocks promised to dirty data over this hole are allocated now: their promise moves.
      const uint64_t promised = n.delalloc.count(b, b + want);
      if (want > promised &&
          blocks_->free_count() < want - promised + delalloc_reserved_ + metadata_reserve_) {
        if (auto r = ensure_space(want - promised, lock); !r) return r;
        continue;  // the lock was dropped: look at the extents again
      }
      auto got = blocks_->reserve(want, 0, b % sb_.stripe_blocks == 0 ? sb_.stripe_blocks : 1);
      if (!got) return fail(got.error());
      delalloc_reserved_ -= n.delalloc.remove(b, b + got->second);
      blocks_->mark_used(*meta_, got->first, got->second);
      insert_extent(n, Extent{b, got->first, static_cast<uint32_t>(got->second), true});
      n.disk.blocks += got->second;
      b += got->second;
      if (auto r = commit_while_large(lock); !r) return r;
    }
  }
  if (!(mode & FALLOC_FL_KEEP_SIZE) && end > n.disk.size) n.disk.size = end;
  n.disk.ctime = now();
  if (punch) n.disk.mtime = n.disk.ctime;
  dirty(n);
  return {};
}

Result<uint64_t> Filesystem::lseek(uint64_t ino, uint64_t offset, int whence) {
  Lock lock(mutex_);
  auto found = get_inode(ino);
  if (!found) return fail(found.error());
  Inode& n = **found;
  if (auto r = load_extents(n); !r) return fail(r.error());
  const uint64_t size = n.disk.size;
  if (offset >= size) return fail(ENXIO, "offset past the end");
  // Data: written extents and cached ranges; unwritten extents read as zeros: holes.
  auto is_data = [&](uint64_t b) -> std::pair<bool, uint64_t> {  // and where that ends
    uint64_t until = UINT64_MAX;
    if (auto c = n.cache.range_after(b * kBlockSize)) {
      if (c->first <= b * kBlockSize) return {true, c->second / kBlockSize};
      until = c->first / kBlockSize;
    }
    const ExtentMap::At here = n.extents.at(b);
    if (here.extent != nullptr) {
      const Extent& x = here.extent->extent;
      if (!x.unwritten) return {true, x.logical_end()};
      return {false, std::min(until, x.logical_end())};
    }
    until = std::min(until, here.next);
    return {false, until};
  };
  uint64_t b = offset / kBlockSize;
  const uint64_t last = align_up(size) / kBlockSize;
  while (b < last) {
    auto [data, until] = is_data(b);
    if (data == (whence == SEEK_DATA)) {
      const uint64_t at = std::max(offset, b * kBlockSize);
      return std::min(at, size);
    }
    b = std::max(until, b + 1);
  }
  if (whence == SEEK_DATA) return fail(ENXIO, "no data past the offset");
  return size;
}

Result<size_t> Filesystem::copy_file_range(uint64_t in, uint64_t in_offset, uint64_t out,
                                           uint64_t out_offset, size_t length) {
  size_t done = 0;
  constexpr size_t kPiece = 1 << 20;
  while (done < length) {
    auto data = read(in, in_offset + done, std::min(kPiece, length - done));
    if (!data) return done > 0 ? Result<size_t>(done) : fail(data.error());
    const size_t n = data->size();
    if (n == 0) break;
    // Whole blocks, aligned on both sides: the source's buffer is shared, not copied (the
    // last partial block, if any, comes round again and is copied).
    const size_t whole = n / kBlockSize * kBlockSize;
    if ((in_offset + done) % kBlockSize == 0 && (out_offset + done) % kBlockSize == 0 &&
        whole > 0 && data->fragments.size() == 1 && data->buffers.size() == 1) {
      const auto offset_in_buffer =
          static_cast<size_t>(data->fragments[0].data() - data->buffers[0]->data());
      auto shared = write_shared(out, out_offset + done, whole, data->buffers[0], offset_in_buffer);
      if (!shared) return done > 0 ? Result<size_t>(done) : fail(shared.error());
      done += whole;
      continue;
    }
    auto written = write(out, out_offset + done, n, [&](std::span<std::byte> dest) -> Result<void> {
      size_t at = 0;
      for (auto f : data->fragments) {
        std::memcpy(dest.data() + at, f.data(), f.size());
        at += f.size();
      }
      return {};
    });
    if (!written) return done > 0 ? Result<size_t>(done) : fail(written.error());
    done += n;
  }
  return done;
}

}  // namespace stripefs::fs
