// LocalRing: a thread that reaps its own ring (a FUSE worker answering a read alone).
#include "raid/local_ring.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <future>
#include <thread>
#include <vector>

#include "raid/aligned_buffer.hpp"
#include "raid/file_member.hpp"

namespace stripefs {
namespace {

constexpr size_t kBlock = 4096;

class LocalRingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Not tmpfs: files there are driven inline and never reach a ring.
    char pattern[] = "/var/tmp/stripefs-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    auto engine = IoEngine::create(64);
    ASSERT_TRUE(engine) << engine.error().message;
    engine_ = std::move(*engine);
    const std::string path = dir_ + "/m";
    const int fd = ::open(path.c_str(), O_CREAT | O_RDWR, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, 1 << 20), 0);
    ::close(fd);
    auto member = FileMember::open(path, *engine_);
    ASSERT_TRUE(member) << member.error().message;
    member_ = std::move(*member);
    if (member_->inline_io())
      GTEST_SKIP() << "/var/tmp is tmpfs here: its files never reach a ring";
    // A thread reaps its own ring only after a quiet spell without company (local_ring.cpp);
    // an earlier test may have kept Reapers busy.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  void TearDown() override {
    member_.reset();
    engine_.reset();
    std::filesystem::remove_all(dir_);
  }
  // Waits for whatever went to the engine after all (a failing test), before the test's
  // locals its completions write to are gone.
  void drain() { engine_.reset(); }

  // A request of `op` at block `index` of `buffer`; `done` records its result and thread.
  struct Outcome {
    int64_t result = -1;
    std::thread::id thread;
    int calls = 0;
  };
  MemberRequest request(MemberOp op, uint64_t index, AlignedBuffer& buffer, Outcome& outcome) {
    MemberRequest r;
    r.op = op;
    r.offset = index * kBlock;
    r.iov.push_back({buffer.data(), kBlock});
    r.done = [&outcome](int64_t n) {
      outcome.result = n;
      outcome.thread = std::this_thread::get_id();
      ++outcome.calls;
    };
    return r;
  }

  // Another thread inside a Reaper with member I/O of its own (a read of block 2, captured,
  // reaped when it leaves), from construction until leave().
  class Company {
   public:
    explicit Company(LocalRingTest& test) : left_(leave_.get_future().share()) {
      std::promise<void> entered;
      thread_ = std::thread([&] {
        LocalRing::Reaper reaper;
        {
          LocalRing::Capture capture;
          test.member_->submit(test.request(MemberOp::read, 2, buffer_, read));
        }
        entered.set_value();
        left_.wait();
      });
      entered.get_future().wait();
    }
    ~Company() { leave(); }
    void leave() {
      if (!thread_.joinable()) return;
      leave_.set_value();
      thread_.join();
    }
    Outcome read;

   private:
    AlignedBuffer buffer_{kBlock};
    std::promise<void> leave_;
    std::shared_future<void> left_;
    std::thread thread_;
  };

  std::string dir_;
  std::unique_ptr<IoEngine> engine_;
  std::unique_ptr<FileMember> member_;
};

TEST_F(LocalRingTest, AReaperAloneRunsItsCompletionsItselfWhenItEnds) {
  AlignedBuffer out(kBlock), in(kBlock);
  std::memset(out.data(), 0x6b, kBlock);
  const uint64_t engine_before = engine_->stats().requests;
  const uint64_t local_before = LocalRing::requests();
  Outcome wrote, read;
  {
    LocalRing::Reaper reaper;
    {
      LocalRing::Capture capture;
      member_->submit(request(MemberOp::write, 3, out, wrote));
    }
    // Captured, not even submitted: nothing can have completed.
    EXPECT_EQ(wrote.calls, 0);
  }
  EXPECT_EQ(wrote.calls, 1);
  EXPECT_EQ(wrote.result, static_cast<int64_t>(kBlock));
  EXPECT_EQ(wrote.thread, std::this_thread::get_id());
  {
    LocalRing::Reaper reaper;
    LocalRing::Capture capture;
    member_->submit(request(MemberOp::read, 3, in, read));
  }
  EXPECT_EQ(read.calls, 1);
  EXPECT_EQ(read.result, static_cast<int64_t>(kBlock));
  EXPECT_EQ(read.thread, std::this_thread::get_id());
  EXPECT_EQ(std::memcmp(in.data(), out.data(), kBlock), 0);
  EXPECT_EQ(LocalRing::requests() - local_before, 2u);
  EXPECT_EQ(engine_->stats().requests, engine_before);
  drain();
}

// A thread's own ring registers the DataArena's chunks too (when it next submits): a
// request on an arena buffer is fixed there as well; one on the heap is not.
TEST_F(LocalRingTest, ArenaBuffersAreFixedOnTheThreadsOwnRing) {
  DataArena::shared().allow(8 << 20);
  AlignedBuffer out = AlignedBuffer::from_arena(kBlock);
  AlignedBuffer in = AlignedBuffer::from_arena(kBlock);
  ASSERT_TRUE(out.in_arena() && in.in_arena()) << "the arena must have room";
  AlignedBuffer heap(kBlock);
  std::memset(out.data(), 0x5a, kBlock);
  const uint64_t local_before = LocalRing::requests();
  const uint64_t fixed_before = LocalRing::fixed_requests();
  Outcome wrote, read, read_heap;
  {
    LocalRing::Reaper reaper;
    LocalRing::Capture capture;
    member_->submit(request(MemberOp::write, 7, out, wrote));
  }
  {
    LocalRing::Reaper reaper;
    LocalRing::Capture capture;
    member_->submit(request(MemberOp::read, 7, in, read));
    member_->submit(request(MemberOp::read, 7, heap, read_heap));
  }
  EXPECT_EQ(wrote.result, static_cast<int64_t>(kBlock));
  EXPECT_EQ(read.result, static_cast<int64_t>(kBlock));
  EXPECT_EQ(read_heap.result, static_cast<int64_t>(kBlock));
  EXPECT_EQ(std::memcmp(in.data(), out.data(), kBlock), 0);
  EXPECT_EQ(std::memcmp(heap.data(), out.data(), kBlock), 0);
  EXPECT_EQ(LocalRing::requests() - local_before, 3u);
  EXPECT_EQ(LocalRing::fixed_requests() - fixed_before, 2u) << "the two arena requests";
  drain();
}

TEST_F(LocalRingTest, WhatACompletionSubmitsIsReapedBeforeTheReaperEnds) {
  AlignedBuffer out(kBlock), in(kBlock);
  std::memset(out.data(), 0x3c, kBlock);
  Outcome wrote, read;
  {
    LocalRing::Reaper reaper;
    LocalRing::Capture capture;
    MemberRequest write = request(MemberOp::write, 5, out, wrote);
    auto first = std::move(write.done);
    // The read is submitted by the write's completion, as a continuation would.
    write.done = [&, first = std::move(first)](int64_t n) mutable {
      first(n);
      member_->submit(request(MemberOp::read, 5, in, read));
    };
    member_->submit(std::move(write));
  }
  EXPECT_EQ(wrote.calls, 1);
  ASSERT_EQ(read.calls, 1);
  EXPECT_EQ(read.result, static_cast<int64_t>(kBlock));
  EXPECT_EQ(read.thread, std::this_thread::get_id());
  EXPECT_EQ(std::memcmp(in.data(), out.data(), kBlock), 0);
  drain();
}

// A completion that comes long after the thread stopped watching for it (20 us, then it
// sleeps): a read of a pipe that is written 5 ms later. It is still reaped, by this thread,
// before the Reaper ends, and with the bytes written.
TEST_F(LocalRingTest, ACompletionLaterThanTheSpinIsReapedAfterTheThreadSleeps) {
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  AlignedBuffer out(kBlock), in(kBlock);
  std::memset(out.data(), 0x5a, kBlock);
  std::memset(in.data(), 0, kBlock);
  Outcome read;
  const auto start = std::chrono::steady_clock::now();
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_EQ(::write(fds[1], out.data(), kBlock), static_cast<ssize_t>(kBlock));
  });
  {
    LocalRing::Reaper reaper;
    LocalRing::Capture capture;
    MemberRequest r = request(MemberOp::read, 0, in, read);
    ASSERT_TRUE(LocalRing::try_submit(fds[0], r)) << "alone: taken on the thread's own ring";
  }
  const auto waited = std::chrono::steady_clock::now() - start;
  writer.join();
  EXPECT_GE(waited, std::chrono::milliseconds(5)) << "reaped before the pipe was written";
  EXPECT_EQ(read.calls, 1);
  EXPECT_EQ(read.result, static_cast<int64_t>(kBlock));
  EXPECT_EQ(read.thread, std::this_thread::get_id());
  EXPECT_EQ(std::memcmp(in.data(), out.data(), kBlock), 0);
  ::close(fds[0]);
  ::close(fds[1]);
  drain();
}

TEST_F(LocalRingTest, WithoutAReaperACaptureLeavesRequestsToTheEngine) {
  AlignedBuffer in(kBlock);
  const uint64_t local_before = LocalRing::requests();
  std::promise<std::thread::id> ran;
  auto thread = ran.get_future();
  {
    LocalRing::Capture capture;
    MemberRequest r;
    r.op = MemberOp::read;
    r.iov.push_back({in.data(), kBlock});
    r.done = [&ran](int64_t) { ran.set_value(std::this_thread::get_id()); };
    member_->submit(std::move(r));
  }
  EXPECT_NE(thread.get(), std::this_thread::get_id());  // the engine's thread
  EXPECT_EQ(LocalRing::requests(), local_before);
}

TEST_F(LocalRingTest, AReaperWithCompanyLeavesRequestsToTheEngine) {
  // Another thread inside a Reaper with member I/O of its own (captured, reaped when it
  // leaves): this one is not alone, so its read goes to the engine (a worker waiting for its
  // own I/O would take no new request under load).
  Company other(*this);
  AlignedBuffer in(kBlock);
  const uint64_t local_before = LocalRing::requests();
  const uint64_t engine_before = engine_->stats().requests;
  std::promise<void> done;
  auto finished = done.get_future();
  {
    LocalRing::Reaper reaper;
    LocalRing::Capture capture;
    MemberRequest r;
    r.op = MemberOp::read;
    r.iov.push_back({in.data(), kBlock});
    r.done = [&done](int64_t) { done.set_value(); };
    member_->submit(std::move(r));
  }
  finished.wait();
  other.leave();
  EXPECT_EQ(LocalRing::requests(), local_before);
  EXPECT_EQ(engine_->stats().requests, engine_before + 1);
  EXPECT_EQ(other.read.calls, 1);  // the other thread reaped its own
  EXPECT_EQ(other.read.result, static_cast<int64_t>(kBlock));
}

TEST_F(LocalRingTest, AReaperWithoutMemberIoIsNoCompany) {
  // A worker answering from the cache submits nothing: it counts for nothing, and a read
  // beside it is still alone.
  std::promise<void> entered, leave;
  auto left = leave.get_future().share();
  std::thread other([&] {
    LocalRing::Reaper reaper;
    entered.set_value();
    left.wait();
  });
  entered.get_future().wait();
  AlignedBuffer in(kBlock);
  Outcome read;
  const uint64_t local_before = LocalRing::requests();
  {
    LocalRing::Reaper reaper;
    LocalRing::Capture capture;
    member_->submit(request(MemberOp::read, 4, in, read));
  }
  leave.set_value();
  other.join();
  EXPECT_EQ(LocalRing::requests() - local_before, 1u);
  EXPECT_EQ(read.calls, 1);
  EXPECT_EQ(read.thread, std::this_thread::get_id());
  drain();
}

TEST_F(LocalRingTest, AFailedRequestReportsItsErrorToItsCompletion) {
  AlignedBuffer in(kBlock);
  Outcome read;
  {
    LocalRing::Reaper reaper;
    LocalRing::Capture capture;
    MemberRequest r = request(MemberOp::read, 1, in, read);
    r.iov[0].iov_base = nullptr;  // no memory there: the kernel answers EFAULT
    member_->submit(std::move(r));
  }
  EXPECT_EQ(read.calls, 1);
  EXPECT_EQ(read.result, -EFAULT);
  drain();
}

TEST_F(LocalRingTest, AReaperLeavesRequestsToTheEngineWhileTheEngineHoldsOne) {
  // The engine's thread is kept busy in a completion, so a second request waits in the
  // engine; while it does, a Reaper is not alone and its read goes to the engine too.
  AlignedBuffer a(kBlock), b(kBlock), c(kBlock);
  std::promise<void> in_callback, release;
  auto released = release.get_future();
  MemberRequest first;
  first.op = MemberOp::read;
  first.iov.push_back({a.data(), kBlock});
  first.done = [&](int64_t) {
    in_callback.set_value();
    released.wait();
  };
  member_->submit(std::move(first));
  in_callback.get_future().wait();
  std::promise<void> second_done;
  MemberRequest second;
  second.op = MemberOp::read;
  second.iov.push_back({b.data(), kBlock});
  second.done = [&](int64_t) { second_done.set_value(); };
  member_->submit(std::move(second));  // held by the engine: its thread is busy
  const uint64_t local_before = LocalRing::requests();
  std::promise<void> third_done;
  {
    LocalRing::Reaper reaper;
    LocalRing::Capture capture;
    MemberRequest third;
    third.op = MemberOp::read;
    third.iov.push_back({c.data(), kBlock});
    third.done = [&](int64_t) { third_done.set_value(); };
    member_->submit(std::move(third));
  }
  EXPECT_EQ(LocalRing::requests(), local_before) << "taken on the thread's own ring";
  release.set_value();
  second_done.get_future().wait();
  third_done.get_future().wait();
  drain();
}

}  // namespace
// A Server (a FUSE worker, fs/daemon/fuse_loop.cpp): a read captured in a Reaper is only
// prepared, and stays in flight while the thread goes back for its next request; the
// Server's wait reaps it, on this thread. The "requests" here are bytes on a pipe.
class LocalRingServerTest : public LocalRingTest {
 protected:
  void SetUp() override {
    LocalRingTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_EQ(pipe2(requests_, O_CLOEXEC | O_NONBLOCK), 0);
    std::memset(out_.data(), 0x2d, kBlock);
    Outcome wrote;
    {
      LocalRing::Reaper reaper;
      LocalRing::Capture capture;
      member_->submit(request(MemberOp::write, 6, out_, wrote));
    }
    ASSERT_EQ(wrote.result, static_cast<int64_t>(kBlock));
  }
  void TearDown() override {
    for (int fd : {requests_[0], requests_[1], slow_[0], slow_[1]}) {
      if (fd >= 0) ::close(fd);
    }
    LocalRingTest::TearDown();
  }
  // Block 6 read in a Reaper, as a FUSE worker's read handler does.
  void read_block_6(AlignedBuffer& in, Outcome& read) {
    LocalRing::Reaper reaper;
    LocalRing::Capture capture;
    member_->submit(request(MemberOp::read, 6, in, read));
  }
  // A read that completes only once the test writes slow_[1]: a slow member's, taken on
  // this thread's ring.
  void read_slowly(AlignedBuffer& in, Outcome& read) {
    if (slow_[0] < 0) {
      ASSERT_EQ(pipe2(slow_, O_CLOEXEC), 0);
    }
    LocalRing::Reaper reaper;
    LocalRing::Capture capture;
    MemberRequest r = request(MemberOp::read, 0, in, read);
    ASSERT_TRUE(LocalRing::try_submit(slow_[0], r));
  }

  int requests_[2] = {-1, -1};
  int slow_[2] = {-1, -1};
  AlignedBuffer out_{kBlock};
};

TEST_F(LocalRingServerTest, AReadStaysInFlightUntilTheServerWaitsAndIsReapedThere) {
  LocalRing::Server server(requests_[0]);
  ASSERT_TRUE(server.ready());
  AlignedBuffer in(kBlock);
  Outcome read;
  const uint64_t local_before = LocalRing::requests();
  const uint64_t engine_before = engine_->stats().requests;
  read_block_6(in, read);
  EXPECT_EQ(read.calls, 0) << "reaped as the Reaper ended: the worker would have waited";
  EXPECT_TRUE(server.busy());
  server.submit();
  for (int i = 0; server.busy() && i < 1000; ++i) EXPECT_FALSE(server.wait()) << "no request";
  EXPECT_FALSE(server.busy());
  EXPECT_EQ(read.calls, 1);
  EXPECT_EQ(read.result, static_cast<int64_t>(kBlock));
  EXPECT_EQ(read.thread, std::this_thread::get_id());
  EXPECT_EQ(std::memcmp(in.data(), out_.data(), kBlock), 0);
  EXPECT_EQ(LocalRing::requests() - local_before, 1u);
  EXPECT_EQ(engine_->stats().requests, engine_before);
}

// A request that comes while member I/O is in flight ends the wait, which reaps on the way.
// A completion that never comes stands in for the slow member: a read of a second pipe.
TEST_F(LocalRingServerTest, ARequestEndsTheWaitOfABusyServer) {
  Outcome read;
  AlignedBuffer in(kBlock);
  {
    LocalRing::Server server(requests_[0]);
    ASSERT_TRUE(server.ready());
    ASSERT_NO_FATAL_FAILURE(read_slowly(in, read));
    server.submit();
    std::thread writer([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      EXPECT_EQ(::write(requests_[1], "r", 1), 1);
    });
    bool request = false;
    for (int i = 0; !request && i < 1000; ++i) request = server.wait();
    writer.join();
    EXPECT_TRUE(request);
    EXPECT_TRUE(server.busy()) << "the slow read is still in flight";
    EXPECT_EQ(read.calls, 0);
    // Ending, the Server waits for it: it comes.
    ASSERT_EQ(::write(slow_[1], out_.data(), kBlock), static_cast<ssize_t>(kBlock));
  }
  EXPECT_EQ(read.calls, 1);
  EXPECT_EQ(read.result, static_cast<int64_t>(kBlock));
  EXPECT_EQ(std::memcmp(in.data(), out_.data(), kBlock), 0);
}

TEST_F(LocalRingServerTest, AServersReadsStayOnItsRingWhileAnotherThreadReads) {
  // Another thread in a Reaper with member I/O of its own would send a plain Reaper's read
  // to the engine; a Server's stays on its ring, since the Server never blocks on it.
  Company other(*this);
  AlignedBuffer in(kBlock);
  Outcome read;
  const uint64_t local_before = LocalRing::requests();
  const uint64_t engine_before = engine_->stats().requests;
  {
    LocalRing::Server server(requests_[0]);
    ASSERT_TRUE(server.ready());
    read_block_6(in, read);
  }  // ending, the Server reaps it
  other.leave();
  EXPECT_EQ(LocalRing::requests() - local_before, 1u);
  EXPECT_EQ(engine_->stats().requests, engine_before);
  EXPECT_EQ(read.calls, 1);
  EXPECT_EQ(read.thread, std::this_thread::get_id());
  EXPECT_EQ(std::memcmp(in.data(), out_.data(), kBlock), 0);
  EXPECT_EQ(other.read.calls, 1);
  drain();
}

TEST_F(LocalRingServerTest, AnEndingServerLeavesNoPollBehind) {
  AlignedBuffer in(kBlock), again(kBlock);
  Outcome read, read_again;
  {
    LocalRing::Server server(requests_[0]);
    ASSERT_TRUE(server.ready());
    ASSERT_NO_FATAL_FAILURE(read_slowly(in, read));
    server.submit();
    // Nothing completes: the wait sleeps with the request descriptor polled until a signal
    // ends it, and the poll stays armed.
    struct sigaction quiet {
    }, old{};
    quiet.sa_handler = [](int) {};
    sigemptyset(&quiet.sa_mask);
    ASSERT_EQ(sigaction(SIGUSR1, &quiet, &old), 0);
    const pthread_t self = pthread_self();
    std::atomic<bool> woken{false};
    std::thread signaller([&] {
      while (!woken.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        if (!woken.load()) pthread_kill(self, SIGUSR1);
      }
    });
    const bool request = server.wait();
    woken = true;
    signaller.join();
    sigaction(SIGUSR1, &old, nullptr);
    EXPECT_FALSE(request);
    EXPECT_TRUE(server.busy());
    ASSERT_EQ(::write(slow_[1], out_.data(), kBlock), static_cast<ssize_t>(kBlock));
  }
  EXPECT_EQ(read.calls, 1);
  EXPECT_EQ(read.thread, std::this_thread::get_id());
  // A poll left armed would complete now, into the plain Reaper's reap below.
  ASSERT_EQ(::write(requests_[1], "r", 1), 1);
  read_block_6(again, read_again);  // no Server: reaped as the Reaper ends
  EXPECT_EQ(read_again.calls, 1);
  EXPECT_EQ(read_again.result, static_cast<int64_t>(kBlock));
  EXPECT_EQ(std::memcmp(again.data(), out_.data(), kBlock), 0);
  drain();
}

}  // namespace stripefs
