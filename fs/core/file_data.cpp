// File data: the buffer cache, reads, writes, delayed allocation and writeback.
#include <absl/container/inlined_vector.h>
#include <fcntl.h>
#include <linux/falloc.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "fs/core/filesystem.hpp"
#include "fs/core/fs_log.hpp"
#include "raid/local_ring.hpp"

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
  // Inline: a read's plan (one run from the volume, perhaps pieces from the cache) costs no
  // allocation of its own.
  absl::InlinedVector<FromCache, 2> cached;
  absl::InlinedVector<FromVolume, 2> volume;
};

// Reads `plan` into `dest` (block-aligned file range [begin, begin + dest.size())): zeros
// where neither the volume nor the cache supplies bytes, the cached bytes at once, the
// volume's from its completion, which then calls `done`.
void start_plan(Volume& volume, const ReadPlan& plan, uint64_t begin, std::span<std::byte> dest,
                Volume::Callback done) {
  absl::InlinedVector<std::pair<uint64_t, uint64_t>, 4> covered;
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
  if (blocks == 0) return {};  // overwrites in place of blocks the file owns need nothing
  std::optional<std::chrono::steady_clock::time_point> deadline;
  for (int attempt = 0;; ++attempt) {
    if (room_for(blocks)) return {};
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
// after the write was acknowledged. Blocks that writeback will allocate: holes, and with
// copy on write every block except unwritten ones written in place (those in flight
// included: by the time this data goes they are written, and move).
Result<void> Filesystem::reserve_delalloc(Inode& inode, uint64_t offset, uint64_t end, Lock& lock) {
  const uint64_t first = offset / kBlockSize, last = end / kBlockSize;
  const bool cow = sb_.has_checksums();
  auto for_each_to_allocate = [&](auto&& f) {
    if (!cow) return inode.extents.for_each_hole(first, last, f);
    uint64_t b = first;
    while (b < last) {
      const ExtentMap::At here = inode.extents.at(b);
      if (here.extent == nullptr) {
        const uint64_t stop = std::min(last, here.next);
        f(b, stop);
        b = stop;
        continue;
      }
      const Extent& x = here.extent->extent;
      const uint64_t stop = std::min(last, x.logical_end());
      if (!x.unwritten || inode.inflight.overlaps(b, stop)) f(b, stop);
      b = stop;
    }
  };
  auto needed = [&] {
    uint64_t need = 0;
    for_each_to_allocate(
        [&](uint64_t a, uint64_t b) { need += (b - a) - inode.delalloc.count(a, b); });
    return need;
  };
  uint64_t need = needed();
  if (!room_for(need)) {
    if (auto r = ensure_space(need, lock); !r) return r;
    // The lock may have been dropped: promise what is unmapped now, and check it still fits.
    need = needed();
  }
  if (need == 0) return {};
  if (!room_for(need)) return fail(ENOSPC, "no space left on the filesystem");
  for_each_to_allocate(
      [&](uint64_t a, uint64_t b) { delalloc_reserved_ += inode.delalloc.add(a, b); });
  return {};
}

// ---------------------------------------------------------------- read

namespace {
// For plan_read: the volume block holding file block b (0: reads as zeros) and how many
// blocks from b (up to `limit`, the blocks still wanted) share that answer.
template <class Inode>
auto readable_run(Inode& inode) {
  return [&inode](uint64_t b, uint64_t limit) { return inode.extents.readable_run(b, limit); };
}

// What of `plan` (a read of [begin, ...) into a buffer) comes from the volume, to be checked.
ReadCheck check_of(uint64_t ino, const ReadPlan& plan, uint64_t begin) {
  ReadCheck check;
  check.ino = ino;
  for (const auto& v : plan.volume) {
    check.runs.push_back({v.volume_block, v.offset, v.offset - begin, v.length});
  }
  return check;
}

// Plans [begin, end) of `inode` from its cache and extents.
template <class Inode, class Map>
ReadPlan plan_read(Inode& inode, uint64_t begin, uint64_t end, Map map) {
  ReadPlan plan;
  auto plan_uncached = [&](uint64_t from, uint64_t to) {
    for (uint64_t b = from / kBlockSize; b < to / kBlockSize;) {
      auto e = map(b, to / kBlockSize - b);  // {volume block or 0, blocks in this run}
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
  // What comes from the volume is checked against its checksums, which are looked up now.
  ReadCheck checking;
  const bool checked = sb_.has_checksums() && !plan.volume.empty();
  if (checked) {
    checking = check_of(ino, plan, begin);
    if (auto r = expect_checksums(checking); !r) {
      lock.unlock();
      fs_log().error("{}", r.error().message);
      return done(fail(EIO, "{}", r.error().message));
    }
  }
  for (const auto& c : plan.cached) stats_.read_copy_bytes += c.length;
  const uint64_t epoch = start_read_locked();
  lock.unlock();
  auto buffer = buffers_->get(end - begin);
  std::shared_ptr<ReadCheck> check;
  if (checked) check = std::make_shared<ReadCheck>(std::move(checking));
  reply.buffers.push_back(buffer);
  reply.fragments.push_back({buffer->data() + (offset - begin), size});
  // The reply first, then the read counts as finished: wait_reads() then covers it too.
  auto answer = [this, epoch, ino, offset](Result<void> r, ReadReply& reply, ReadDone& done) {
    if (!r) {
      fs_log().error("inode {}: read at {}: {}", ino, offset, r.error().message);
      done(fail(EIO, "{}", r.error().message));
    } else {
      done(std::move(reply));
    }
    finish_read(epoch);
  };
  // Submitted on this thread's own ring when its caller reaps it (a FUSE worker answering a
  // read: local_ring.hpp); the plan only submits.
  LocalRing::Capture capture;
  start_plan(volume_, plan, begin, buffer->span(),
             [this, check, answer, buffer, reply = std::move(reply),
              done = std::move(done)](Result<void> r) mutable {
               if (r && check) {
                 std::vector<size_t> failed = failed_blocks(*check, buffer->span());
                 if (!failed.empty()) {
                   // Recovery blocks: not here, on a member's completion thread.
                   struct Parked {
                     ReadReply reply;
                     ReadDone done;
                   };
                   auto parked = std::make_shared<Parked>(std::move(reply), std::move(done));
                   if (!healer_.post([this, check, answer, buffer, parked,
                                      failed = std::move(failed)]() mutable {
                         answer(recover_blocks(*check, failed, buffer->span()), parked->reply,
                                parked->done);
                       })) {
                     // The filesystem is going away: the read fails rather than hangs.
                     answer(fail(EIO,
                                 "inode {}: blocks failing their checksums, and the "
                                 "filesystem stopped before recovering them",
                                 check->ino),
                            parked->reply, parked->done);
                   }
                   return;
                 }
               }
               answer(std::move(r), reply, done);
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
// I/O this very thread must complete, or on a thread that holds mutex_ itself (one that
// released a stripe lock): so mutex_ is only tried (an OwnedMutex: false then), never
// waited for. Frees this
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
  for (const auto& c : plan.cached) stats_.read_copy_bytes += c.length;
  if (auto r = run_plan(volume_, plan, offset, dest); !r) return r;
  if (!sb_.has_checksums() || plan.volume.empty()) return {};
  ReadCheck check = check_of(inode.ino, plan, offset);
  if (auto r = expect_checksums(check); !r) return r;
  const std::vector<size_t> failed = failed_blocks(check, dest);
  return failed.empty() ? Result<void>() : recover_blocks(check, failed, dest);
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

Result<size_t> Filesystem::write(uint64_t ino, uint64_t offset, size_t size, const CopyIn& copy,
                                 KillPrivs* kill) {
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
  if (kill != nullptr) {
    if (auto r = kill_privs(n, *kill); !r) return fail(r.error());
  }
  if (auto r = admit_write(n, begin, end, lock); !r) return fail(r.error());
  // Partially written first and last blocks take the rest of their bytes from the file.
  const uint64_t stop = offset + size;
  AlignedBuffer edge(kBlockSize);
  if (offset > begin) {
    if (auto r = fill_from_volume(n, begin, edge.span(), lock); !r)
      return fail(EIO, "{}", r.error().message);
    std::memcpy(buffer->data(), edge.data(), offset - begin);
    stats_.edge_copy_bytes += offset - begin;
    if (end - begin == kBlockSize && stop < end) {
      std::memcpy(buffer->data() + (stop - begin), edge.data() + (stop - begin), end - stop);
      stats_.edge_copy_bytes += end - stop;
    }
  }
  if (stop < end && (end - begin > kBlockSize || offset == begin)) {
    if (auto r = fill_from_volume(n, end - kBlockSize, edge.span(), lock); !r) {
      return fail(EIO, "{}", r.error().message);
    }
    const size_t keep = end - stop;
    std::memcpy(buffer->data() + (end - begin) - keep, edge.data() + kBlockSize - keep, keep);
    stats_.edge_copy_bytes += keep;
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

}  // namespace stripefs::fs
