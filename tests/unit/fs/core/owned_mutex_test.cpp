// OwnedMutex: exclusion under contention (its lock spins before it sleeps), and try_lock's
// answers to its owner and to others.
#include "fs/core/owned_mutex.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace stripefs::fs {
namespace {

TEST(OwnedMutex, ThreadsThatContendNeverHoldItTogether) {
  OwnedMutex mutex;
  uint64_t counter = 0;  // not atomic: only the lock orders the increments
  std::atomic<unsigned> inside{0}, overlaps{0};
  constexpr unsigned kThreads = 4, kRounds = 50'000;
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (unsigned i = 0; i < kRounds; ++i) {
        std::lock_guard lock(mutex);
        if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
        ++counter;
        inside.fetch_sub(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(counter, uint64_t{kThreads} * kRounds);
  EXPECT_EQ(overlaps.load(), 0u);
}

// A holder that keeps it far longer than the spin: the waiter sleeps, and gets it only once
// it is let go.
TEST(OwnedMutex, AWaiterPastTheSpinGetsItOnlyAfterTheRelease) {
  OwnedMutex mutex;
  std::atomic<bool> waiting{false}, released{false}, got{false}, saw_release{false};
  mutex.lock();
  std::thread waiter([&] {
    waiting = true;
    std::lock_guard lock(mutex);
    saw_release = released.load();
    got = true;
  });
  while (!waiting) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // far past the spin
  EXPECT_FALSE(got.load());
  released = true;
  mutex.unlock();
  waiter.join();
  EXPECT_TRUE(got.load());
  EXPECT_TRUE(saw_release.load());
}

TEST(OwnedMutex, TryLockFailsForItsOwnerAndForOthersWhileHeld) {
  OwnedMutex mutex;
  mutex.lock();
  EXPECT_FALSE(mutex.try_lock()) << "its owner";
  bool other = true;
  std::thread([&] { other = mutex.try_lock(); }).join();
  EXPECT_FALSE(other) << "another thread";
  mutex.unlock();
  std::thread([&] {
    other = mutex.try_lock();
    if (other) mutex.unlock();
  }).join();
  EXPECT_TRUE(other) << "free";
}

}  // namespace
}  // namespace stripefs::fs
