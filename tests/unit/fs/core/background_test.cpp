// The filesystem's two threads alone: the submitter (writeback to the Volume) and the worker
// (completions and the timers).
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstring>

#include "fs/core/submitter.hpp"
#include "fs/core/worker.hpp"
#include "raid/wait.hpp"
#include "unit/raid/test_util.hpp"

namespace stripefs::fs {
namespace {

TEST(Submitter, WritesReachTheVolumeAndEachCompletesOnce) {
  test::MemoryArray array(4, 8 << 20);
  auto geometry = Geometry::create(RaidLevel::raid5, 4, 65536, 8 << 20);
  auto volume = Volume::create(*geometry, array.members(), 0);
  ASSERT_TRUE(volume);
  Submitter submitter(**volume);
  submitter.start();
  constexpr int kWrites = 64;
  std::vector<AlignedBuffer> buffers;
  for (int i = 0; i < kWrites; ++i) buffers.push_back(test::random_buffer(8192, i));
  std::mutex mutex;
  std::condition_variable cv;
  int done = 0;
  for (int i = 0; i < kWrites; ++i) {
    submitter.submit({{uint64_t(i) * 8192, buffers[i].span()}}, [&](Result<void> r) {
      EXPECT_TRUE(r);
      std::lock_guard lock(mutex);
      ++done;
      cv.notify_all();
    });
  }
  {
    std::unique_lock lock(mutex);
    cv.wait(lock, [&] { return done == kWrites; });
  }
  submitter.stop();
  AlignedBuffer back(8192);
  for (int i = 0; i < kWrites; ++i) {
    ASSERT_TRUE((*volume)->read(uint64_t(i) * 8192, back.span()));
    EXPECT_EQ(std::memcmp(back.data(), buffers[i].data(), 8192), 0) << i;
  }
}

TEST(Submitter, StopSubmitsWhatIsQueued) {
  test::MemoryArray array(4, 8 << 20);
  auto geometry = Geometry::create(RaidLevel::raid5, 4, 65536, 8 << 20);
  auto volume = Volume::create(*geometry, array.members(), 0);
  ASSERT_TRUE(volume);
  AlignedBuffer data = test::random_buffer(4096, 1);
  std::atomic<int> done{0};
  Submitter submitter(**volume);
  for (int i = 0; i < 10; ++i) {
    submitter.submit({{uint64_t(i) * 4096, data.span()}}, [&](Result<void>) { ++done; });
  }
  submitter.start();  // queued before it started
  submitter.stop();
  EXPECT_EQ(done.load(), 10);
}

TEST(Worker, RunsPostedTasksInOrderThenTheTick) {
  std::mutex mutex;
  std::vector<int> order;
  std::atomic<int> ticks{0};
  Worker worker(std::chrono::milliseconds(10), [&] { ++ticks; });
  worker.start();
  EXPECT_TRUE(worker.running());
  for (int i = 0; i < 100; ++i) {
    worker.post([&, i] {
      std::lock_guard lock(mutex);
      order.push_back(i);
    });
  }
  // The tick also comes without tasks, at least every period.
  const int seen = ticks.load();
  while (ticks.load() < seen + 3) std::this_thread::yield();
  worker.stop();
  EXPECT_FALSE(worker.running());
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
}

TEST(Worker, StopRunsWhatIsPosted) {
  std::atomic<int> ran{0};
  Worker worker(std::chrono::hours(1), [] {});
  worker.start();
  for (int i = 0; i < 50; ++i) worker.post([&] { ++ran; });
  worker.stop();
  EXPECT_EQ(ran.load(), 50);
}

}  // namespace
}  // namespace stripefs::fs
