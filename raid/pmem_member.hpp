// A member backed by persistent memory through libpmem2: a DAX character device (/dev/daxX.Y)
// or a file mapped whole. Requests are memory copies and complete synchronously inside
// submit().
//
// Durability: writes copy without flushing and record the range as dirty; MemberOp::flush
// makes every dirty range durable. A FUA write is durable when its `done` runs and is not
// recorded as dirty. Flushing on every write would turn each small write into cache-line
// flushes (or an msync) that a later flush would repeat anyway. On a page-granularity
// mapping libpmem2 makes ranges durable with msync and aborts the process if msync fails:
// neither flush nor FUA ever completes with an error.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "raid/member.hpp"

struct pmem2_source;
struct pmem2_map;

namespace stripefs {

class PmemMember final : public Member {
 public:
  // Maps `path` whole. Errors name the path and the step that failed.
  static Result<std::unique_ptr<PmemMember>> open(const std::string& path);
  // Unmaps without flushing: writes never covered by a flush (or FUA) may be lost, exactly
  // as with a volatile disk cache on power loss.
  ~PmemMember() override;

  // Requests beyond the mapping fail with -EINVAL. As on a disk, a request that overlaps
  // a write in flight at the same time sees old bytes, new bytes or a mix.
  void submit(MemberRequest request) override;

  // Ranges handed to the library to make durable: one per FUA write, one per dirty range at
  // a flush (merged ranges count once).
  uint64_t persist_calls() const { return persist_calls_.load(std::memory_order_relaxed); }
  // Bytes written but not yet durable.
  uint64_t dirty_bytes() const;

 private:
  using MemcpyFn = void* (*)(void* dest, const void* src, size_t length, unsigned flags);
  using FlushFn = void (*)(const void* address, size_t length);
  using DrainFn = void (*)();

  struct Mapping;  // the descriptor, source and mapping; frees them in order

  PmemMember(std::string name, uint64_t size, DeviceLimits limits,
             std::unique_ptr<Mapping> mapping);

  int64_t execute(const MemberRequest& request);
  void mark_dirty(uint64_t begin, uint64_t end);
  void persist_dirty();

  std::unique_ptr<Mapping> mapping_;
  std::byte* base_;
  MemcpyFn memcpy_;
  FlushFn persist_;
  FlushFn flush_;
  DrainFn drain_;

  mutable std::mutex mutex_;
  // Dirty byte ranges, begin -> end (exclusive); disjoint and never adjacent.
  std::map<uint64_t, uint64_t> dirty_;
  uint64_t dirty_bytes_ = 0;
  std::atomic<uint64_t> persist_calls_{0};
};

}  // namespace stripefs
