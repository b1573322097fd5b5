// A member device of an array: the asynchronous block interface every backend implements.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <span>
#include <string>
#include <vector>

#include "raid/device_limits.hpp"
#include "raid/member_shape.hpp"
#include "raid/result.hpp"

namespace stripefs {

enum class MemberOp : uint8_t { read, write, flush };

// One request to a member. Offsets and lengths are in bytes from the start of the device
// and multiples of its logical block size; buffers are aligned to it. The buffers belong to
// the caller and must stay live and unchanged until `done` runs.
struct MemberRequest {
  MemberOp op = MemberOp::read;
  uint64_t offset = 0;
  std::vector<iovec> iov;
  bool fua = false;     // write: durable when done (RWF_DSYNC), not only when flushed
  uint32_t merged = 1;  // planned I/Os merged into it (submit_ios), for the shape counters
  // Called exactly once, from any thread, with the bytes transferred or -errno.
  std::function<void(int64_t)> done;

  uint64_t length() const;
};

// What a member has done since it was opened, as status reports it: finished requests,
// their bytes, and the requests that failed (flushes included).
struct MemberCounters {
  uint64_t reads = 0;
  uint64_t writes = 0;
  uint64_t read_bytes = 0;
  uint64_t written_bytes = 0;
  uint64_t errors = 0;
  uint64_t corrected = 0;        // read errors healed: rewritten from redundancy and read back
  uint64_t checksum_errors = 0;  // chunks that read without error but failed a checksum
};

class Member {
 public:
  Member(std::string name, uint64_t size, DeviceLimits limits)
      : name_(std::move(name)), size_(size), limits_(limits) {}
  virtual ~Member() = default;
  Member(const Member&) = delete;
  Member& operator=(const Member&) = delete;

  const std::string& name() const { return name_; }
  uint64_t size() const { return size_; }
  const DeviceLimits& limits() const { return limits_; }
  // Tests force limits (e.g. a 4 KiB optimal I/O size) to exercise alignment decisions.
  void override_limits(const DeviceLimits& limits) { limits_ = limits; }

  // Starts the request; completion is reported through request.done. Never blocks on the
  // device; the caller must not hold locks that `done` may take.
  virtual void submit(MemberRequest request) = 0;
  // What the array's code calls: counts the request's shape (shape()), then submit(). A
  // backend that wraps another (a hot replace, fault injection) calls the inner submit(),
  // so each request is counted once, on the device the array sent it to.
  void start(MemberRequest request) {
    shape_.note(request.op, request.offset, request.length(), request.merged, request.fua,
                preferred_io_size(limits_));
    submit(std::move(request));
  }
  // Counted by start(); alignment against preferred_io_size(limits()).
  MemberShape shape() const { return shape_.snapshot(); }

  // Counts one finished request: the Volume's batches (submit_ios) and the blocking helpers
  // below call it from their completions. Relaxed: figures for people, never for decisions.
  void count(MemberOp op, uint64_t bytes, bool ok);
  MemberCounters counters() const;
  // One more read error healed on this device (Volume: read_failed); the count so far.
  // (A stand-in such as a hot replace's counts on the device it stands for.)
  virtual uint64_t count_corrected() {
    return corrected_.fetch_add(1, std::memory_order_relaxed) + 1;
  }
  // One more chunk on this device found wrong by a checksum (Volume::recover_block); the
  // count so far. (A stand-in counts on the device it stands for, as count_corrected.)
  virtual uint64_t count_checksum_error() {
    return checksum_errors_.fetch_add(1, std::memory_order_relaxed) + 1;
  }

 private:
  std::string name_;
  uint64_t size_;
  DeviceLimits limits_;
  std::atomic<uint64_t> reads_{0}, writes_{0}, read_bytes_{0}, written_bytes_{0}, errors_{0};
  std::atomic<uint64_t> corrected_{0};
  std::atomic<uint64_t> checksum_errors_{0};
  MemberShapeCounters shape_;
};

// A slot of a member table that may change while I/O runs (MemberSet::swap_device): read and
// written atomically, so a submitter sees either device, never a torn pointer.
inline Member* load_member(std::span<Member* const> members, size_t index) {
  return std::atomic_ref<Member*>(const_cast<Member*&>(members[index]))
      .load(std::memory_order_acquire);
}
inline void store_member(std::span<Member*> members, size_t index, Member* device) {
  std::atomic_ref<Member*>(members[index]).store(device, std::memory_order_release);
}

// Blocking helpers for setup paths (superblocks, tests, tools). Never call them from a
// completion callback: they wait for one.
Result<void> member_read(Member& member, uint64_t offset, std::span<std::byte> buffer);
Result<void> member_write(Member& member, uint64_t offset, std::span<const std::byte> buffer,
                          bool fua = false);
Result<void> member_flush(Member& member);
// A read or write of `buffer` at `offset`, started: the future gives what member_read or
// member_write would have returned, once it has finished (for a caller that starts more
// meanwhile). The buffer must stay live until then.
std::future<Result<void>> member_start(Member& member, MemberOp op, uint64_t offset,
                                       std::span<std::byte> buffer);

}  // namespace stripefs
