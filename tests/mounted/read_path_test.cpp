// How the daemon answers reads from its members: a read's member I/O is submitted by the FUSE
// worker that took the request, on its own ring, and reaped there while the worker waits for
// its next request (fs/daemon/fuse_loop.hpp, raid/local_ring.hpp). Every byte comes back
// right, from registered buffers, and a signal stops the daemon cleanly with reads in flight.
// Members under /var/tmp go through io_uring, as disks do.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "mounted/array_check.hpp"
#include "mounted/mounted_fixture.hpp"

namespace stripefs::test {
namespace {

constexpr uint64_t kBlock = 4096;
constexpr uint64_t kFileBytes = 4 * kMiB;

uint64_t io_counter(const nlohmann::json& stats, const char* name) {
  return stats["io"][name].get<uint64_t>();
}

class ReadPath : public MountedTest {
 protected:
  // The file on the members, nothing of it in any cache: written, then a remount.
  void SetUp() override {
    MountedTest::SetUp();
    if (HasFatalFailure() || !fs_.can_remount()) return;
    data_ = random_bytes(kFileBytes, 77);
    Fd fd = open_file(path("f"), O_WRONLY | O_CREAT | O_TRUNC);
    ASSERT_TRUE(fd.valid());
    ASSERT_TRUE(write_at(fd.get(), data_, 0));
    ASSERT_EQ(fsync(fd.get()), 0);
    ASSERT_EQ(fd.close(), 0);
    auto remounted = fs_.remount();
    ASSERT_TRUE(remounted) << remounted.error();
  }

  // Reads block `b` of the file with O_DIRECT (past the kernel's page cache) and compares.
  ::testing::AssertionResult read_block(int fd, uint64_t b, void* buffer) const {
    const ssize_t n = pread(fd, buffer, kBlock, static_cast<off_t>(b * kBlock));
    if (n != static_cast<ssize_t>(kBlock)) {
      return ::testing::AssertionFailure() << "block " << b << ": read gave " << n;
    }
    if (std::memcmp(buffer, data_.data() + b * kBlock, kBlock) != 0) {
      return ::testing::AssertionFailure() << "block " << b << ": wrong bytes";
    }
    return ::testing::AssertionSuccess();
  }

  Bytes data_;
};

TEST_F(ReadPath, ReadsAloneAreReapedByTheWorkerThatTookThem) {
  if (!fs_.can_remount()) GTEST_SKIP() << "needs the stripefs daemon";
  auto before = daemon_query(fs_.root().string(), "stats");
  ASSERT_TRUE(before) << before.error();
  Fd fd = open_file(path("f"), O_RDONLY | O_DIRECT);
  ASSERT_TRUE(fd.valid());
  void* buffer = nullptr;
  ASSERT_EQ(posix_memalign(&buffer, kBlock, kBlock), 0);
  std::unique_ptr<void, decltype(&free)> owned(buffer, &free);
  // One at a time, in a scattered order: no two blocks in one member request.
  const uint64_t blocks = kFileBytes / kBlock;
  for (uint64_t i = 0; i < blocks; ++i) {
    ASSERT_TRUE(read_block(fd.get(), (i * 97) % blocks, buffer));
  }
  auto after = daemon_query(fs_.root().string(), "stats");
  ASSERT_TRUE(after) << after.error();
  const uint64_t local =
      io_counter(*after, "local_ring_requests") - io_counter(*before, "local_ring_requests");
  // The daemon's own background I/O (a commit) may send a few to the engine meanwhile.
  EXPECT_GE(local, blocks / 2) << "member reads reaped by the FUSE worker itself";
}

// File data lives in the daemon's DataArena, which every ring has registered: member reads
// of it are fixed-buffer requests (raid/data_arena.hpp), whole 1 MiB reads (several chunks of
// one member merged into a vectored request) and 4 KiB reads alike, and the bytes are right.
TEST_F(ReadPath, MemberReadsUseRegisteredBuffers) {
  if (!fs_.can_remount()) GTEST_SKIP() << "needs the stripefs daemon";
  Fd fd = open_file(path("f"), O_RDONLY | O_DIRECT);
  ASSERT_TRUE(fd.valid());
  void* buffer = nullptr;
  ASSERT_EQ(posix_memalign(&buffer, kBlock, kMiB), 0);
  std::unique_ptr<void, decltype(&free)> owned(buffer, &free);
  ASSERT_TRUE(read_block(fd.get(), 0, buffer));  // the file's extents are loaded now
  auto before = daemon_query(fs_.root().string(), "stats");
  ASSERT_TRUE(before) << before.error();
  for (uint64_t at = 0; at < kFileBytes; at += kMiB) {
    ASSERT_EQ(pread(fd.get(), buffer, kMiB, static_cast<off_t>(at)), static_cast<ssize_t>(kMiB));
    ASSERT_EQ(std::memcmp(buffer, data_.data() + at, kMiB), 0) << "at " << at;
  }
  const uint64_t blocks = kFileBytes / kBlock;
  for (uint64_t i = 0; i < 256; ++i) ASSERT_TRUE(read_block(fd.get(), (i * 97) % blocks, buffer));
  auto after = daemon_query(fs_.root().string(), "stats");
  ASSERT_TRUE(after) << after.error();
  auto delta = [&](const char* name) {
    return io_counter(*after, name) - io_counter(*before, name);
  };
  const uint64_t requests = delta("engine_requests") + delta("local_ring_requests");
  const uint64_t fixed = delta("engine_fixed_requests") + delta("local_ring_fixed_requests");
  ASSERT_GE(requests, 256u) << "the reads must have reached the members";
  // The daemon's own background I/O (a commit, an atime) may use other buffers meanwhile.
  EXPECT_GE(fixed * 10, requests * 9) << fixed << " of " << requests << " requests fixed";
  EXPECT_GT((*after)["io"]["data_arena_bytes"].get<uint64_t>(), 0u);
}

TEST_F(ReadPath, ConcurrentReadersGetTheirOwnBytes) {
  if (!fs_.can_remount()) GTEST_SKIP() << "needs the stripefs daemon";
  // Eight readers at once: each worker keeps the member reads of several requests in flight
  // on its own ring, and answers each from its completion; every read's bytes must be its
  // block's.
  constexpr int kReaders = 8;
  constexpr int kPasses = 3;
  const uint64_t blocks = kFileBytes / kBlock;
  auto before = daemon_query(fs_.root().string(), "stats");
  ASSERT_TRUE(before) << before.error();
  std::atomic<int> failures{0};
  std::vector<std::string> why(kReaders);
  std::vector<std::thread> readers;
  for (int r = 0; r < kReaders; ++r) {
    readers.emplace_back([&, r] {
      Fd fd = open_file(path("f"), O_RDONLY | O_DIRECT);
      void* buffer = nullptr;
      if (!fd.valid() || posix_memalign(&buffer, kBlock, kBlock) != 0) {
        why[r] = "cannot open or allocate";
        ++failures;
        return;
      }
      std::unique_ptr<void, decltype(&free)> owned(buffer, &free);
      for (int pass = 0; pass < kPasses; ++pass) {
        for (uint64_t i = 0; i < blocks; ++i) {
          const uint64_t b = (i * 31 + static_cast<uint64_t>(r) * 131 + pass) % blocks;
          if (auto ok = read_block(fd.get(), b, buffer); !ok) {
            why[r] = ok.message();
            ++failures;
            return;
          }
        }
      }
    });
  }
  for (auto& t : readers) t.join();
  for (int r = 0; r < kReaders; ++r)
    EXPECT_TRUE(why[r].empty()) << "reader " << r << ": " << why[r];
  EXPECT_EQ(failures.load(), 0);
  auto after = daemon_query(fs_.root().string(), "stats");
  ASSERT_TRUE(after) << after.error();
  const uint64_t reads = kReaders * kPasses * blocks;
  // Not through the engine's thread, under load too (its own background I/O aside).
  EXPECT_GE(io_counter(*after, "local_ring_requests") - io_counter(*before, "local_ring_requests"),
            reads * 9 / 10)
      << "member reads on the workers' own rings";
}

// SIGTERM while readers keep reads in flight: the workers stop taking requests, reap what
// their rings hold (every reply sent), and the daemon unmounts and exits with status 0. A
// read either gets its block's bytes or fails once the mount is gone, never wrong bytes; the
// file is whole after the next mount.
TEST_F(ReadPath, ASignalStopsTheDaemonCleanlyWithReadsInFlight) {
  if (!fs_.can_remount()) GTEST_SKIP() << "needs the stripefs daemon";
  constexpr int kReaders = 4;
  const uint64_t blocks = kFileBytes / kBlock;
  std::atomic<uint64_t> good{0};
  std::atomic<int> ended{0};
  std::vector<std::string> why(kReaders);
  std::vector<std::thread> readers;
  for (int r = 0; r < kReaders; ++r) {
    readers.emplace_back([&, r] {
      struct Ended {
        std::atomic<int>& count;
        ~Ended() { ++count; }
      } counted{ended};
      Fd fd = open_file(path("f"), O_RDONLY | O_DIRECT);
      void* buffer = nullptr;
      if (!fd.valid() || posix_memalign(&buffer, kBlock, kBlock) != 0) {
        why[r] = "cannot open or allocate";
        return;
      }
      std::unique_ptr<void, decltype(&free)> owned(buffer, &free);
      for (uint64_t i = 0;; ++i) {
        const uint64_t b = (i * 61 + static_cast<uint64_t>(r) * 257) % blocks;
        const ssize_t n = pread(fd.get(), buffer, kBlock, static_cast<off_t>(b * kBlock));
        if (n < 0) return;  // the mount has gone
        if (n != static_cast<ssize_t>(kBlock) ||
            std::memcmp(buffer, data_.data() + b * kBlock, kBlock) != 0) {
          why[r] = "block " + std::to_string(b) + ": wrong bytes or a short read";
          return;
        }
        ++good;
      }
    });
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (good.load() < 2000 && ended.load() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(ended.load(), 0) << "a reader ended before the signal";
  auto stopped = fs_.stop(SIGTERM);
  for (auto& t : readers) t.join();
  ASSERT_TRUE(stopped) << stopped.error();
  for (int r = 0; r < kReaders; ++r)
    EXPECT_TRUE(why[r].empty()) << "reader " << r << ": " << why[r];
  auto mounted = fs_.mount();
  ASSERT_TRUE(mounted) << mounted.error();
  Fd fd = open_file(path("f"), O_RDONLY);
  ASSERT_TRUE(fd.valid());
  Bytes back(kFileBytes);
  ASSERT_EQ(pread(fd.get(), back.data(), back.size(), 0), static_cast<ssize_t>(kFileBytes));
  EXPECT_TRUE(back == data_) << "the file after the stop";
}

}  // namespace
}  // namespace stripefs::test
