// A member served at a device's bandwidth, for benchmarks on tmpfs: the bytes move at memory
// speed, but each request completes only when a device of `rate` bytes per second, serving
// its requests one after another, would have finished it. Members on tmpfs share the CPUs
// and one memory bus, so there a rebuild, which reads every other member for each byte it
// writes, is bound by the machine rather than by the members; modeled, each member is an
// independent device again, as disks and SSDs are, and what is measured is whether the
// engine keeps every device busy (reads of all sources in parallel, the next reads issued
// while the last writes are in flight) — what decides a rebuild's time on real hardware.
//
// The model: a request of n bytes that the inner member has done at time t completes at
// max(t, busy_until) + n / rate, and moves busy_until there (reads and writes alike; a
// flush costs nothing). Completions run on one clock thread shared by every modeled device.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <queue>
#include <thread>
#include <vector>

#include "raid/member.hpp"

namespace stripefs::bench {

// Runs callbacks at given times, on its own thread, in time order. Destruction runs those
// still pending at once (their callers wait for them), then stops.
class DeviceClock {
 public:
  using Clock = std::chrono::steady_clock;

  DeviceClock();
  ~DeviceClock();
  DeviceClock(const DeviceClock&) = delete;
  DeviceClock& operator=(const DeviceClock&) = delete;

  void at(Clock::time_point when, std::function<void()> work);

 private:
  struct Due {
    Clock::time_point when;
    uint64_t order;  // equal times run in the order they were given
    std::function<void()> work;
    bool operator>(const Due& o) const { return when != o.when ? when > o.when : order > o.order; }
  };
  void run();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::priority_queue<Due, std::vector<Due>, std::greater<>> due_;
  uint64_t next_order_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

class ModeledDevice final : public Member {
 public:
  // `inner` and `clock` must outlive this device and every request submitted through it.
  ModeledDevice(Member& inner, uint64_t bytes_per_second, DeviceClock& clock);

  void submit(MemberRequest request) override;

 private:
  Member& inner_;
  const double seconds_per_byte_;
  DeviceClock& clock_;
  std::mutex mutex_;
  DeviceClock::Clock::time_point busy_until_{};
};

}  // namespace stripefs::bench
