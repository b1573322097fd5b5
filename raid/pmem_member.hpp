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

  // With `on`, every write is made durable before its `done` runs, as a FUA write is: the
  // per-write flushing this member exists to avoid, kept for measuring what it costs
  // (stripefs-bench pmem). Off by default; a request in flight meanwhile gets either.
  void set_persist_each_write(bool on) { persist_each_write_.store(on, std::memory_order_relaxed); }

  // Ranges handed to the library to make durable: one per FUA (or persisted) write, one per
  // dirty range at a flush (merged ranges count once).
  uint64_t persist_calls() const { return persist_calls_.load(std::memory_order_relaxed); }
  // Bytes written and not yet taken by a flush (nor made durable by FUA).
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

  // Held by one flush at a time, from taking the dirty ranges until they are durable: a
  // flush cannot complete while ranges an earlier flush took are not. Writers never wait
  // for it.
  std::mutex flush_mutex_;
  mutable std::mutex mutex_;  // dirty_ and dirty_bytes_, held only to update them
  // Dirty byte ranges, begin -> end (exclusive); disjoint and never adjacent.
  std::map<uint64_t, uint64_t> dirty_;
  uint64_t dirty_bytes_ = 0;
  std::atomic<uint64_t> persist_calls_{0};
  std::atomic<bool> persist_each_write_{false};
};

}  // namespace stripefs
