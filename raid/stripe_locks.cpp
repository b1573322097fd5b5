#include "stripe_locks.hpp"

namespace stripefs {

bool StripeLocks::acquire(uint64_t stripe, std::function<void()> resume) {
  std::lock_guard lock(mutex_);
  auto [it, inserted] = held_.try_emplace(stripe);
  if (inserted) return true;
  it->second.push_back(std::move(resume));
  return false;
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
  next();  // the stripe stays held, now by the waiter
}

size_t StripeLocks::held() const {
  std::lock_guard lock(mutex_);
  return held_.size();
}

}  // namespace stripefs
