#include "raid/join.hpp"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "raid/wait.hpp"

namespace stripefs {
namespace {

TEST(Join, TheLastPartAnswersOnceWithTheFirstError) {
  int calls = 0;
  Result<void> seen;
  auto join = Join::start(3, [&](Result<void> r) {
    ++calls;
    seen = std::move(r);
  });
  join->finish();
  join->finish(fail(EIO, "first"));
  EXPECT_EQ(calls, 0);
  join->finish(fail(ENOSPC, "second"));
  ASSERT_EQ(calls, 1);
  ASSERT_FALSE(seen);
  EXPECT_EQ(seen.error().code, EIO);
  EXPECT_EQ(seen.error().message, "first");
}

TEST(Join, PartsAddedBeforeTheLastFinishesAreWaitedFor) {
  int calls = 0;
  auto join = Join::start(1, [&](Result<void> r) {
    ++calls;
    EXPECT_TRUE(r);
  });
  join->add(2);
  join->finish();
  join->finish();
  EXPECT_EQ(calls, 0);
  join->finish();
  EXPECT_EQ(calls, 1);
}

// What `done` holds is released once it has run (a job that holds its own join).
TEST(Join, ReleasesWhatDoneHeld) {
  auto held = std::make_shared<int>(7);
  std::weak_ptr<int> watch = held;
  auto join = Join::start(1, [held = std::move(held)](Result<void>) {});
  join->finish();
  EXPECT_TRUE(watch.expired());
}

TEST(Join, PartsOnManyThreads) {
  constexpr int kParts = 64;
  auto result = wait_for<Result<void>>([&](std::function<void(Result<void>)> done) {
    auto join = Join::start(kParts, std::move(done));
    std::vector<std::thread> threads;
    for (int i = 0; i < kParts; ++i) {
      threads.emplace_back([join, i] {
        join->finish(i == 40 ? Result<void>(fail(EIO, "part 40")) : Result<void>{});
      });
    }
    for (auto& t : threads) t.join();
  });
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().message, "part 40");
}

}  // namespace
}  // namespace stripefs
