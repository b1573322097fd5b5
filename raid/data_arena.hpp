// The memory file data lives in while it goes to and from the members, in chunks that every
// io_uring ring of the process registers as fixed buffers: a request whose buffer lies in a
// registered chunk skips the kernel's per-request page pinning (get_user_pages of every page,
// on the submitting thread; for a 1 MiB O_DIRECT write most of the submitter's system time).
//
// One arena per process, never unmapped: a ring may hold a chunk registered (its pages pinned)
// for as long as the ring lives, and a fixed request at an address whose memory had been
// unmapped and mapped again would go to the old pages. So chunks are added and never taken
// away, and a chunk's virtual pages are never remapped (no MADV_DONTNEED).
//
// It grows by a chunk at a time, up to the limit its users allow (`allow`): the filesystem
// allows its cache and its pool of idle buffers, so the arena is at most what the daemon
// would hold in heap buffers at its busiest, and stays at its high-water mark. Memory beyond
// the limit, or a buffer larger than a chunk, comes from the heap as before (not fixed).
//
// Rings (raid/ring_buffers.hpp) register chunk i at slot kFirstSlot + i when they next submit;
// a request is fixed only if its ring has registered the chunk, so no ordering is needed
// between a thread that grows the arena and one that submits.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace stripefs {

struct DataArenaStats {
  uint64_t chunks = 0;        // chunks mapped (each kChunkBytes)
  uint64_t bytes_in_use = 0;  // allocated and not yet released
  uint64_t refused = 0;       // asks that went to the heap: no room, the limit, or over a chunk
};

class DataArena {
 public:
  static constexpr size_t kChunkBytes = 4u << 20;
  static constexpr size_t kPageBytes = 4096;
  static constexpr unsigned kMaxChunks = 256;  // the shared arena's: 1 GiB of address space
  // Ring slots below this are the IoEngine's own (`IoEngine::register_buffer`).
  static constexpr unsigned kFirstSlot = 64;

  // The process's arena.
  static DataArena& shared();
  // An arena of its own, for tests: `max_chunks` at most, unmapped when destroyed (no ring
  // registers it).
  explicit DataArena(unsigned max_chunks);
  ~DataArena();
  DataArena(const DataArena&) = delete;
  DataArena& operator=(const DataArena&) = delete;

  // Lets the arena grow to at least `bytes` (rounded up to chunks; never lowered).
  void allow(size_t bytes);
  // `bytes` (rounded up to pages) inside one chunk, page-aligned; nullptr when it does not fit
  // a chunk or the arena is at its limit. Thread-safe.
  std::byte* allocate(size_t bytes);
  // Gives back what `allocate` returned.
  void release(std::byte* data);

  // How many chunks exist; chunk i starts at chunk_base(i). Lock-free.
  unsigned chunks() const { return chunks_.load(std::memory_order_acquire); }
  std::byte* chunk_base(unsigned i) const { return base_ + size_t{i} * kChunkBytes; }
  // The chunk [data, data + length) lies in, if it lies in one of the first `chunks`; else -1.
  int chunk_of(const void* data, size_t length, unsigned chunks) const {
    const auto p = reinterpret_cast<uintptr_t>(data);
    const auto base = reinterpret_cast<uintptr_t>(base_);
    if (base_ == nullptr || p < base || length == 0) return -1;
    const uintptr_t first = (p - base) / kChunkBytes;
    if (first >= chunks || (p + length - 1 - base) / kChunkBytes != first) return -1;
    return static_cast<int>(first);
  }

  DataArenaStats stats() const;

 private:
  bool grow();                                                 // under mutex_
  std::byte* take(unsigned chunk, size_t pages, size_t unit);  // under mutex_

  unsigned max_chunks_;
  void* reserved_ = nullptr;   // the mapping: max_chunks_ chunks and 2 MiB to align them
  std::byte* base_ = nullptr;  // 2 MiB aligned
  std::atomic<unsigned> chunks_{0};
  mutable std::mutex mutex_;
  size_t limit_chunks_ = 0;
  // Per chunk: one bit per page (set: in use), and at the first page of each allocation its
  // length in pages. A chunk holds buffers of one kind while it holds any: small ones (under
  // 64 KiB, in pages) or large ones (in 64 KiB units), so that the small buffers the pools
  // keep for long do not break up the room large ones need.
  std::vector<std::vector<uint64_t>> used_;
  std::vector<std::vector<uint16_t>> runs_;
  std::vector<size_t> free_pages_;  // per chunk: a chunk with fewer is not searched
  std::vector<size_t> unit_;        // per chunk: 1 (small), 16 (large) or 0 (empty, either)
  uint64_t bytes_in_use_ = 0;
  uint64_t refused_ = 0;
};

}  // namespace stripefs
