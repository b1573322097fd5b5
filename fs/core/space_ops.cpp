// The space operations: truncate, fallocate (keep size, punch hole, zero range),
// SEEK_DATA/SEEK_HOLE and copy_file_range, which for whole blocks aligned in both files
// shares the source's immutable buffer instead of copying it.
#include "fs/core/space_ops.hpp"

#include <fcntl.h>
#include <linux/falloc.h>

#include <cstring>

#include "fs/core/filesystem.hpp"
#include "fs/core/fs_log.hpp"

namespace stripefs::fs {

namespace {

uint64_t align_down(uint64_t v) {
  return v / kBlockSize * kBlockSize;
}
uint64_t align_up(uint64_t v) {
  return (v + kBlockSize - 1) / kBlockSize * kBlockSize;
}

}  // namespace

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
      if (want > promised && !room_for(want - promised)) {
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

Result<uint64_t> seek_data_or_hole(const FileCache& cache, const ExtentMap& extents, uint64_t size,
                                   uint64_t offset, int whence) {
  if (offset >= size) return fail(ENXIO, "offset past the end");
  // Data: written extents and cached ranges; unwritten extents read as zeros: holes.
  auto is_data = [&](uint64_t b) -> std::pair<bool, uint64_t> {  // and where that ends
    uint64_t until = UINT64_MAX;
    if (auto c = cache.range_after(b * kBlockSize)) {
      if (c->first <= b * kBlockSize) return {true, c->second / kBlockSize};
      until = c->first / kBlockSize;
    }
    const ExtentMap::At here = extents.at(b);
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

Result<uint64_t> Filesystem::lseek(uint64_t ino, uint64_t offset, int whence) {
  Lock lock(mutex_);
  auto found = get_inode(ino);
  if (!found) return fail(found.error());
  Inode& n = **found;
  if (auto r = load_extents(n); !r) return fail(r.error());
  return seek_data_or_hole(n.cache, n.extents, n.disk.size, offset, whence);
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
