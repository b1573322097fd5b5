// An I/O thread that owns one io_uring ring. Requests from any thread are queued, submitted
// in batches, and their continuations run on this thread when the ring completes them.
#pragma once

#include <liburing.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "raid/member.hpp"
#include "raid/result.hpp"
#include "raid/ring_buffers.hpp"

namespace stripefs {

struct IoEngineStats {
  uint64_t requests = 0;        // member requests completed
  uint64_t fixed_requests = 0;  // of those, served from a registered (fixed) buffer
  uint64_t largest_batch = 0;   // most requests one submission carried
  uint64_t submit_calls = 0;    // submissions that carried requests: requests / submit_calls
                                // is the batching (a submission that carried only the
                                // thread's wake-up read counts too; that read is no request)
};

class IoEngine;

// A registered fixed buffer; unregisters on destruction. Destroy it before the memory it
// covers is freed: the kernel keeps the registered pages pinned, and a later request at a
// reused address would otherwise read or write the old pages.
class FixedBuffer {
 public:
  FixedBuffer() = default;
  FixedBuffer(IoEngine* engine, unsigned slot) : engine_(engine), slot_(slot) {}
  ~FixedBuffer();
  FixedBuffer(FixedBuffer&& other) noexcept
      : engine_(std::exchange(other.engine_, nullptr)), slot_(other.slot_) {}
  FixedBuffer& operator=(FixedBuffer&& other) noexcept {
    std::swap(engine_, other.engine_);
    std::swap(slot_, other.slot_);
    return *this;
  }
  unsigned slot() const { return slot_; }

 private:
  IoEngine* engine_ = nullptr;
  unsigned slot_ = 0;
};

class IoEngine {
 public:
  static constexpr unsigned kMaxRegisteredBuffers = DataArena::kFirstSlot;

  static Result<std::unique_ptr<IoEngine>> create(unsigned queue_depth = 256);
  // Waits for every queued and in-flight request to complete, then stops the thread.
  ~IoEngine();
  IoEngine(const IoEngine&) = delete;
  IoEngine& operator=(const IoEngine&) = delete;

  // Queues a request on `fd`. Thread-safe; `request.done` runs on the engine's thread, or,
  // for a request submitted once the engine is shutting down, at once on the submitting
  // thread with -ESHUTDOWN.
  void submit(int fd, MemberRequest request);

  // Registers [base, base+length) as a fixed buffer: requests that lie inside it skip the
  // kernel's per-request page pinning (several segments only where the kernel has vectored
  // fixed ops). Registered until the returned handle is destroyed. The DataArena's chunks
  // need no call: the engine registers them itself (ring_buffers.hpp).
  Result<FixedBuffer> register_buffer(void* base, size_t length);

  IoEngineStats stats() const;

 private:
  struct Pending {
    int fd;
    MemberRequest request;
  };
  struct Region {
    uintptr_t base;
    size_t length;
  };

  friend class FixedBuffer;
  explicit IoEngine(unsigned queue_depth);
  void unregister_buffer(unsigned slot);
  void run();
  void arm_wakeup();
  bool prepare(Pending* pending);
  int region_slot(const MemberRequest& request);
  void complete(io_uring_cqe* cqe);

  io_uring ring_{};
  unsigned queue_depth_;
  int wake_fd_ = -1;
  uint64_t wake_value_ = 0;
  std::thread thread_;

  std::mutex mutex_;  // guards queue_ and stopping_
  std::vector<std::unique_ptr<Pending>> queue_;
  bool stopping_ = false;

  // Owned by the engine thread.
  std::thread::id thread_id_;
  std::vector<std::unique_ptr<Pending>> backlog_;
  std::vector<io_uring_cqe> completed_;
  unsigned in_flight_ = 0;
  RingBuffers arena_;  // the DataArena's chunks in this ring

  std::mutex regions_mutex_;  // guards regions_ (read per request not in the arena)
  std::array<Region, kMaxRegisteredBuffers> regions_{};  // length 0: free slot

  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> fixed_requests_{0};
  std::atomic<uint64_t> submit_calls_{0};
  std::atomic<uint64_t> largest_batch_{0};
  void count_submission(int submitted);
};

}  // namespace stripefs
