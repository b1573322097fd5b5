#include "bench/modeled_device.hpp"

#include <algorithm>
#include <utility>

namespace stripefs::bench {

DeviceClock::DeviceClock() : thread_([this] { run(); }) {}

DeviceClock::~DeviceClock() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void DeviceClock::at(Clock::time_point when, std::function<void()> work) {
  {
    std::lock_guard lock(mutex_);
    due_.push({when, next_order_++, std::move(work)});
  }
  changed_.notify_all();
}

void DeviceClock::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    if (due_.empty()) {
      if (stopping_) return;
      changed_.wait(lock);
      continue;
    }
    const Clock::time_point when = due_.top().when;
    if (!stopping_ && Clock::now() < when) {
      changed_.wait_until(lock, when);  // or an earlier one was given meanwhile
      continue;
    }
    std::function<void()> work = std::move(const_cast<Due&>(due_.top()).work);
    due_.pop();
    lock.unlock();
    work();  // may submit more, and so call at()
    lock.lock();
  }
}

ModeledDevice::ModeledDevice(Member& inner, uint64_t bytes_per_second, DeviceClock& clock)
    : Member(inner.name(), inner.size(), inner.limits()),
      inner_(inner),
      seconds_per_byte_(1.0 / static_cast<double>(bytes_per_second)),
      clock_(clock) {}

void ModeledDevice::submit(MemberRequest request) {
  const uint64_t bytes = request.op == MemberOp::flush ? 0 : request.length();
  auto done = std::move(request.done);
  request.done = [this, bytes, done = std::move(done)](int64_t result) mutable {
    const auto now = DeviceClock::Clock::now();
    DeviceClock::Clock::time_point finish;
    {
      std::lock_guard lock(mutex_);
      busy_until_ =
          std::max(now, busy_until_) +
          std::chrono::duration_cast<DeviceClock::Clock::duration>(
              std::chrono::duration<double>(static_cast<double>(bytes) * seconds_per_byte_));
      finish = busy_until_;
    }
    clock_.at(finish, [done = std::move(done), result] { done(result); });
  };
  inner_.submit(std::move(request));
}

}  // namespace stripefs::bench
