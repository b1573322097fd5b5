// What a Volume counts: how its writes went out (full stripes, read-modify-write,
// reconstruct-write, degraded) and how many member I/Os it planned.
#pragma once

#include <atomic>
#include <cstdint>

namespace stripefs {

struct VolumeStats {
  uint64_t full_stripe_writes = 0;
  uint64_t full_stripe_bytes = 0;  // caller bytes that took the full-stripe path
  uint64_t partial_stripe_writes = 0;
  uint64_t partial_stripe_bytes = 0;
  uint64_t rmw_writes = 0;       // partial stripes done by read-modify-write
  uint64_t rcw_writes = 0;       // ... by reconstruct-write
  uint64_t degraded_writes = 0;  // partial stripes written with a member missing
  uint64_t prereads = 0;         // member reads issued for partial-stripe writes
  uint64_t preread_bytes = 0;
  uint64_t degraded_reads = 0;    // read segments rebuilt from parity
  uint64_t member_write_ios = 0;  // planned member I/Os of the Volume's requests, before
                                  // merging (not a rebuild's or a scrub's: Array's pacing)
  uint64_t member_read_ios = 0;
  uint64_t direct_reads = 0;  // reads within one chunk sent straight to their member
};

// The live counters behind VolumeStats, bumped from any thread.
struct VolumeCounters {
  std::atomic<uint64_t> full_stripe_writes{0}, full_stripe_bytes{0};
  std::atomic<uint64_t> partial_stripe_writes{0}, partial_stripe_bytes{0};
  std::atomic<uint64_t> rmw_writes{0}, rcw_writes{0}, degraded_writes{0};
  std::atomic<uint64_t> prereads{0}, preread_bytes{0}, degraded_reads{0};
  std::atomic<uint64_t> member_write_ios{0}, member_read_ios{0}, direct_reads{0};

  static void add(std::atomic<uint64_t>& counter, uint64_t n) {
    counter.fetch_add(n, std::memory_order_relaxed);
  }
  VolumeStats snapshot() const {
    VolumeStats s;
    s.full_stripe_writes = full_stripe_writes.load();
    s.full_stripe_bytes = full_stripe_bytes.load();
    s.partial_stripe_writes = partial_stripe_writes.load();
    s.partial_stripe_bytes = partial_stripe_bytes.load();
    s.rmw_writes = rmw_writes.load();
    s.rcw_writes = rcw_writes.load();
    s.degraded_writes = degraded_writes.load();
    s.prereads = prereads.load();
    s.preread_bytes = preread_bytes.load();
    s.degraded_reads = degraded_reads.load();
    s.member_write_ios = member_write_ios.load();
    s.member_read_ios = member_read_ios.load();
    s.direct_reads = direct_reads.load();
    return s;
  }
};

}  // namespace stripefs
