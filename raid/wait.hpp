// Blocking on asynchronous calls, for setup paths, tools and tests: one way to do it.
//
// Never call these from a completion (a member's, the Volume's, an I/O engine's): they wait
// for one, and the thread that would run it may be the one waiting.
#pragma once

#include <condition_variable>
#include <mutex>
#include <optional>
#include <utility>

namespace stripefs {

// Calls `start(callback)`, where `callback` takes one value of type T, and waits until the
// callback has run (on any thread, possibly inside `start`); returns that value.
template <class T, class Start>
T wait_for(Start&& start) {
  std::mutex mutex;
  std::condition_variable cv;
  std::optional<T> result;
  start([&](T value) {
    // Set and notified under the lock: the waiter cannot return, and destroy all three,
    // before this callback is done with them.
    std::lock_guard lock(mutex);
    result.emplace(std::move(value));
    cv.notify_one();
  });
  std::unique_lock lock(mutex);
  cv.wait(lock, [&] { return result.has_value(); });
  return std::move(*result);
}

}  // namespace stripefs
