#include "raid/stripe_locks.hpp"

#include "raid/wait.hpp"

namespace stripefs {

bool StripeLocks::acquire(uint64_t stripe, std::function<void()> resume) {
  std::lock_guard lock(mutex_);
  auto [it, inserted] = held_.try_emplace(stripe);
  if (inserted) return true;
  it->second.push_back(std::move(resume));
  return false;
}

void StripeLocks::lock(uint64_t stripe) {
  wait_for<bool>([&](std::function<void(bool)> granted) {
    if (acquire(stripe, [granted] { granted(true); })) granted(true);
  });
}

void StripeLocks::release(uint64_t stripe) {
  std::function<void()> next;
  {
    std::lock_guard lock(mutex_);
    auto it = held_.find(stripe);
    if (it == held_.end()) return;
    if (it->second.empty()) {
      held_.erase(it);
      return;
    }
    next = std::move(it->second.front());
    it->second.pop_front();
  }
  // The stripe stays held, now by the waiter. Its continuation may finish at once and
  // release again (members that complete inside submit): run such hand-overs from one loop
  // per thread instead of nesting them, or a queue of thousands overflows the stack.
  thread_local bool handing_over = false;
  thread_local std::deque<std::function<void()>> handovers;
  handovers.push_back(std::move(next));
  if (handing_over) return;
  handing_over = true;
  while (!handovers.empty()) {
    auto run = std::move(handovers.front());
    handovers.pop_front();
    run();
  }
  handing_over = false;
}

size_t StripeLocks::held() const {
  std::lock_guard lock(mutex_);
  return held_.size();
}

}  // namespace stripefs
