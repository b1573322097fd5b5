// The background worker: tasks posted while it runs are run, in order, on its thread; once
// it has stopped, post says so and the task is not kept (a caller waiting on it would
// wait forever: it answers for the task itself).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "fs/core/worker.hpp"

namespace stripefs::fs {
namespace {

TEST(Worker, RunsWhatIsPostedThenRefusesOnceStopped) {
  std::atomic<int> ticks{0};
  Worker worker(std::chrono::milliseconds(5), [&] { ++ticks; });
  std::vector<int> ran;
  std::thread::id on;
  worker.start();
  for (int i = 0; i < 100; ++i) {
    EXPECT_TRUE(worker.post([&, i] {
      ran.push_back(i);
      on = std::this_thread::get_id();
    }));
  }
  worker.stop();  // runs what was posted first
  ASSERT_EQ(ran.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(ran[i], i);
  EXPECT_NE(on, std::this_thread::get_id());
  EXPECT_GT(ticks.load(), 0);
  bool late = false;
  EXPECT_FALSE(worker.post([&] { late = true; }));
  EXPECT_FALSE(late);
}

TEST(Worker, AWorkerNeverStartedRunsWhatWasPostedAtItsStopThenRefuses) {
  Worker worker(std::chrono::milliseconds(5), [] {});
  bool early = false;
  EXPECT_TRUE(worker.post([&] { early = true; }));
  worker.stop();
  EXPECT_TRUE(early);
  EXPECT_FALSE(worker.post([] {}));
}

// Posts racing the stop: each task either runs or is refused, never kept unrun.
TEST(Worker, APostRacingTheStopRunsOrIsRefused) {
  for (int round = 0; round < 50; ++round) {
    Worker worker(std::chrono::milliseconds(1), [] {});
    worker.start();
    std::atomic<int> accepted{0}, ran{0};
    std::thread poster([&] {
      for (int i = 0; i < 200; ++i) {
        if (worker.post([&] { ++ran; })) ++accepted;
      }
    });
    worker.stop();
    poster.join();
    EXPECT_EQ(ran.load(), accepted.load()) << "round " << round;
  }
}

}  // namespace
}  // namespace stripefs::fs
