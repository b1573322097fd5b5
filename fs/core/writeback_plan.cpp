#include "fs/core/writeback_plan.hpp"

#include <algorithm>

namespace stripefs::fs {

WritebackPlan plan_writeback(uint64_t id, uint64_t ino, uint64_t offset, uint64_t end,
                             FileCache& cache, ExtentMap& extents, IntervalSet& inflight,
                             IntervalSet& delalloc, const WritebackSpace& space) {
  WritebackPlan plan;
  auto job = std::make_shared<WritebackJob>();
  job->id = id;
  job->ino = ino;
  job->begin = offset;
  job->end = end;
  const uint64_t stripe = space.stripe_blocks;
  uint64_t replaced = 0;  // runs of written blocks this job replaces (copy on write)
  job->bytes = cache.freeze(offset, end, id, [&](uint64_t start, const CachedRange& r) {
    const uint64_t first = start / kBlockSize;
    const uint64_t stop = (start + r.length) / kBlockSize;
    if (replaced >= space.max_replaced) {
      // Enough replaced runs for one transaction's frees (each may dirty a bitmap block of
      // its own when the job completes): the rest goes with the next job. Nothing after
      // this is taken, so nothing after it is looked at: with random writes into a large
      // cache, tens of thousands of dirty ranges would each cost a lookup in `inflight`,
      // under the filesystem lock, at every job's completion.
      plan.deferred = true;
      return FileCache::Freeze::stop;
    }
    if (inflight.overlaps(first, stop)) {
      plan.deferred = true;  // goes when the job writing these blocks is done
      return FileCache::Freeze::skip;
    }
    for (uint64_t b = first; b < stop;) {
      // The extent covering b, or the hole up to the next one.
      const ExtentMap::At here = extents.at(b);
      uint64_t run = 0, volume_block = 0;
      const bool in_place =
          here.extent != nullptr && (here.extent->extent.unwritten || !space.copy_on_write);
      if (in_place) {
        const Extent& x = here.extent->extent;
        run = std::min(stop, x.logical_end()) - b;
        volume_block = x.physical + (b - x.logical);
        if (x.unwritten) job->converted.emplace_back(b, b + run);
        // Reservations made for blocks that turn out not to need one go back.
        plan.promised_released += delalloc.remove(b, b + run);
      } else {
        // A hole, or (copy on write) written blocks: new volume blocks, next to the file's
        // previous block where they can be.
        const uint64_t until =
            here.extent != nullptr ? here.extent->extent.logical_end() : here.next;
        const uint64_t end_of_run = std::min(stop, until);
        const uint64_t before = b > 0 ? extents.map(b - 1) : 0;
        const uint64_t goal = before != 0 ? before + 1 : 0;
        const uint64_t want = std::min<uint64_t>({end_of_run - b, kMaxExtentLength, space.max_run});
        auto got = space.allocate(want, goal, b % stripe == 0 ? stripe : 1);
        if (!got) {
          if (!plan.failed) {
            plan.failed = Error{ENOSPC, fmt::format("inode {}: writeback found no space for "
                                                    "reserved data",
                                                    ino)};
          }
          break;
        }
        plan.promised_released += delalloc.remove(b, b + got->second);
        run = got->second;
        volume_block = got->first;
        if (here.extent != nullptr) {
          extents.replace(b, run, got->first);
          ++replaced;
        } else {
          extents.add(MemExtent{Extent{b, got->first, static_cast<uint32_t>(run), false}, true});
        }
        job->allocated.emplace_back(b, b + run);
      }
      const size_t at = r.buffer_offset + (b * kBlockSize - start);
      job->pieces.push_back(
          {volume_block * kBlockSize, r.buffer->span().subspan(at, run * kBlockSize)});
      b += run;
    }
    inflight.add(first, stop);
    job->blocks.emplace_back(first, stop);
    job->buffers.push_back(r.buffer);
    return FileCache::Freeze::take;
  });
  std::sort(job->pieces.begin(), job->pieces.end(),
            [](const VolumePiece& a, const VolumePiece& b) { return a.offset < b.offset; });
  if (!job->pieces.empty()) plan.job = std::move(job);
  return plan;
}

}  // namespace stripefs::fs
