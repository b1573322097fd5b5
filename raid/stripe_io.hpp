// What a level's I/O operations work with (raid/level.hpp): one stripe of a Volume write
// as the caller's buffers, and the parts of the Volume a level may use to write it or to
// rebuild a read.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "raid/aligned_buffer.hpp"
#include "raid/buffer_pool.hpp"
#include "raid/geometry.hpp"
#include "raid/member_set.hpp"
#include "raid/result.hpp"
#include "raid/stripe_locks.hpp"
#include "raid/stripe_log.hpp"
#include "raid/volume_stats.hpp"

namespace stripefs {

class Level;

// One contiguous run of the volume and the caller's buffer for it. Offsets, lengths and
// buffer addresses must be multiples of the array's sector size (512 or the members'
// largest logical block).
struct VolumePiece {
  uint64_t offset;
  std::span<std::byte> data;
};

using IoDone = std::function<void(Result<void>)>;

// A run of caller data inside one chunk.
struct Segment {
  uint64_t chunk_offset;
  uint64_t length;
  std::byte* data;
};

// One stripe of a Volume write, under its stripe lock. The caller's buffers are written as
// they are (stable pages): nothing here copies them.
struct StripeWrite {
  uint64_t stripe = 0;
  std::vector<std::vector<Segment>> data;  // new data per data index, sorted, disjoint
  uint64_t bytes = 0;
  uint64_t lo = 0, hi = 0;  // chunk-relative rows the write touches
  bool full = false;
  uint64_t planned_missing = 0;  // partial stripe: members missing when planned
  PooledBuffer parity;           // full stripe: P then Q
  AlignedBuffer buffer;          // partial stripe: one scratch slot per chunk
};

// The Volume's parts a level's I/O may use; they outlive every operation.
struct StripeIo {
  const Geometry& geometry;
  const Level& level;
  MemberSet& members;
  uint64_t data_offset;  // where the data area starts on every member
  VolumeCounters& stats;
  StripeLocks& locks;
  BufferPool& parity_pool;          // P (and Q) of full-stripe writes (registrable arena)
  StripeLog* stripe_log = nullptr;  // partial parity stripes are logged here first, if set

  // True when some data can no longer be read or written (beyond the level's redundancy).
  bool failed() const;
};

// Segments covering [lo, hi) exactly: `segments` (sorted, non-overlapping) with the gaps
// between them filled from `scratch`, which holds [lo, hi); the segments themselves only
// with `include_segments`.
std::vector<Segment> fill_gaps(const std::vector<Segment>& segments, uint64_t lo, uint64_t hi,
                               std::byte* scratch, bool include_segments);

// P (and Q) over [lo, hi) of data chunks given as segment lists that each cover [lo, hi).
// Parity goes to p/q, which hold [lo, hi). No data is copied: isa-l reads the segments
// where they are, cut where any chunk's segments change.
void generate_segmented(const std::vector<std::vector<Segment>>& sources, uint64_t lo, uint64_t hi,
                        std::byte* p, std::byte* q);

}  // namespace stripefs
