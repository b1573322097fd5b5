// Per-stripe exclusion without blocking a thread: a holder runs its continuation at once;
// later requests for the same stripe queue their continuations and run, in order, as the
// stripe is released. The mutex is held only while the table changes, never while a
// continuation runs.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <unordered_map>

namespace stripefs {

class StripeLocks {
 public:
  // Takes the stripe and returns true, or queues `resume` (run once the stripe is handed
  // over) and returns false. Deadlock freedom is the callers' duty: take several stripes in
  // ascending order.
  bool acquire(uint64_t stripe, std::function<void()> resume);
  // Takes the stripe, waiting until it is handed over. Blocking: never from a completion.
  void lock(uint64_t stripe);
  // Hands the stripe to the next waiter (running its continuation on this thread) or frees it.
  // Hand-overs on one thread run from one loop, not nested, so a long queue of continuations
  // that release at once cannot overflow the stack.
  void release(uint64_t stripe);
  size_t held() const;

 private:
  mutable std::mutex mutex_;
  std::unordered_map<uint64_t, std::deque<std::function<void()>>> held_;
};

}  // namespace stripefs
