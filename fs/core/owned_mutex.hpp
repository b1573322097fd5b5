// A mutex that knows which thread holds it, so that try_lock() from that very thread fails
// (false) instead of being undefined, as std::mutex::try_lock by its owner is. For a lock
// that code called back on an arbitrary thread only tries: the Volume runs a completion on
// whichever thread releases a stripe lock, and that thread may hold this mutex.
// A BasicLockable and Lockable: use it with std::lock_guard, std::unique_lock and
// std::condition_variable_any.
#pragma once

#include <atomic>
#include <mutex>
#include <thread>

namespace stripefs::fs {

class OwnedMutex {
 public:
  void lock() {
    mutex_.lock();
    owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  }
  void unlock() {
    owner_.store(std::thread::id(), std::memory_order_relaxed);
    mutex_.unlock();
  }
  // False when another thread holds it, and when this one does. (Only this thread stores its
  // own id, so a relaxed load sees it exactly while this thread holds the mutex.)
  bool try_lock() {
    if (owner_.load(std::memory_order_relaxed) == std::this_thread::get_id()) return false;
    if (!mutex_.try_lock()) return false;
    owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
    return true;
  }

 private:
  std::mutex mutex_;
  std::atomic<std::thread::id> owner_{};
};

}  // namespace stripefs::fs
