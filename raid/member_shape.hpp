// The shape of the requests an array sends one member, as md's history cares about it:
// their sizes, how many were merged from several planned I/Os (io_batch.hpp), how they lie
// against the device's alignment unit (its optimal I/O size, else its physical block), FUA
// writes and flushes. Counted by Member::start as each request starts; relaxed counters:
// figures for people (stripefsctl iostat), never for decisions.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

namespace stripefs {

enum class MemberOp : uint8_t;

// Request sizes in powers of two: up to 4 KiB, 8 KiB, ... 1 MiB, and larger.
constexpr unsigned kSizeBuckets = 10;
unsigned size_bucket(uint64_t bytes);
const char* size_bucket_name(unsigned bucket);  // "4K" ... "1M", ">1M"

// How a request of `length` bytes at `offset` lies against units of `unit` bytes.
enum class Alignment : uint8_t {
  aligned,     // whole units: starts and ends on a boundary
  within,      // inside one unit, not whole (a small request)
  straddling,  // crosses a boundary without being whole units: split or misplaced
};
Alignment alignment_of(uint64_t offset, uint64_t length, uint64_t unit);

struct MemberShape {
  struct Direction {
    uint64_t requests = 0;
    uint64_t bytes = 0;
    std::array<uint64_t, kSizeBuckets> sizes{};  // requests per size_bucket
    uint64_t merged = 0;                         // requests made of two or more planned I/Os
    uint64_t merged_ios = 0;                     // the planned I/Os in those
    uint64_t aligned = 0;
    uint64_t straddling = 0;  // (the rest lie within one unit)
  };
  Direction read, write;
  uint64_t fua_writes = 0;
  uint64_t flushes = 0;
};

class MemberShapeCounters {
 public:
  // One request started: `merged` planned I/Os in it, `unit` the member's alignment unit.
  void note(MemberOp op, uint64_t offset, uint64_t length, uint32_t merged, bool fua,
            uint64_t unit);
  MemberShape snapshot() const;

 private:
  struct Direction {
    std::atomic<uint64_t> requests{0}, bytes{0}, merged{0}, merged_ios{0}, aligned{0},
        straddling{0};
    std::array<std::atomic<uint64_t>, kSizeBuckets> sizes{};
  };
  Direction read_, write_;
  std::atomic<uint64_t> fua_writes_{0}, flushes_{0};
};

}  // namespace stripefs
