// A member wrapper that misbehaves on purpose, for failure and crash tests: EIO on chosen
// ranges or after N requests, silent corruption, added latency, a volatile write cache whose
// unflushed writes vanish on a simulated power cut, and a log of every request it saw.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "raid/member.hpp"

namespace stripefs {

struct ByteRange {
  uint64_t begin = 0;
  uint64_t end = 0;  // exclusive
  bool overlaps(uint64_t offset, uint64_t length) const {
    return offset < end && offset + length > begin;
  }
};

struct LoggedIo {
  MemberOp op;
  uint64_t offset;
  uint64_t length;
  bool fua;
  std::vector<iovec> iov;  // the buffers as submitted: who owned the bytes
};

class FaultyMember final : public Member {
 public:
  // `inner` must outlive this wrapper.
  explicit FaultyMember(Member& inner);
  ~FaultyMember() override;

  void submit(MemberRequest request) override;

  // --- what to inject (thread-safe, effective for requests submitted afterwards) ---
  void fail_range(MemberOp op, ByteRange range);  // EIO for requests touching range
  void fail_after(uint64_t requests);             // every request after the Nth: EIO
  // Unreadable sectors, as a disk's pending sectors: reads touching `range` fail (EIO) until
  // a write touches it, which the disk then remaps (the range reads normally again).
  void bad_sectors(ByteRange range);
  void corrupt_reads(ByteRange range);                  // flip a byte per 512 B returned
  void corrupt_writes(ByteRange range);                 // store data with a flipped byte
  void set_latency(std::chrono::microseconds latency);  // delay before reaching inner
  void set_volatile_cache(bool enabled);                // writes wait in a cache for flush
  void heal();                                          // stop failing and corrupting
  // Requests of kind `op` (read or write) touching `range` submitted from now on wait,
  // unanswered, until release_held() (keeps one in flight for as long as a test needs).
  // Other requests pass.
  void hold(MemberOp op, ByteRange range);
  void release_held();  // sends the held requests on
  size_t held() const;

  // Drops unflushed cached writes, keeping each with probability `survive` (0: all lost).
  // Returns how many were lost.
  size_t power_cut(double survive = 0.0, uint64_t seed = 1);
  size_t cached_writes() const;

  // --- what happened ---
  void set_logging(bool enabled);
  std::vector<LoggedIo> take_log();
  uint64_t requests_seen() const;

 private:
  struct CachedWrite {
    uint64_t offset;
    std::vector<std::byte> data;
  };
  struct Delayed {
    std::chrono::steady_clock::time_point due;
    MemberRequest request;
  };

  void dispatch(MemberRequest request);
  void forward(MemberRequest request);
  void flush_cache(MemberRequest request);
  void delay_loop();

  Member& inner_;
  mutable std::mutex mutex_;
  std::vector<std::pair<MemberOp, ByteRange>> fail_ranges_;
  std::optional<uint64_t> fail_after_;
  std::vector<ByteRange> bad_sectors_;
  std::vector<ByteRange> corrupt_reads_;
  std::vector<ByteRange> corrupt_writes_;
  bool volatile_cache_ = false;
  std::vector<CachedWrite> cache_;
  bool logging_ = false;
  std::vector<LoggedIo> log_;
  uint64_t requests_ = 0;

  std::optional<ByteRange> hold_range_;
  MemberOp hold_op_ = MemberOp::read;
  std::vector<MemberRequest> held_;
  std::chrono::microseconds latency_{0};
  std::deque<Delayed> delayed_;
  std::condition_variable delay_cv_;
  bool stopping_ = false;
  std::thread delay_thread_;
};

}  // namespace stripefs
