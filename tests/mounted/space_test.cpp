// Free space: what statfs reports, how it follows writes and deletes, and running out.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <thread>

#include "mounted/mounted_fixture.hpp"

namespace stripefs::test {
namespace {

// FUSE's f_type, from linux/magic.h.
constexpr long kFuseSuperMagic = 0x65735546;
// Filling more than this would make the test slow; a target that large is skipped.
constexpr uint64_t kMaxFill = 4 * kGiB;
// Freed space may be returned in the background; how long we wait for it.
constexpr auto kReleaseTimeout = std::chrono::seconds(10);

class Space : public MountedTest {
 protected:
  struct statvfs statvfs_of() {
    struct statvfs st {};
    if (statvfs(path().c_str(), &st) != 0) {
      ADD_FAILURE() << "statvfs: " << errno_name(errno);
      st = {};
    }
    return st;
  }
  uint64_t free_bytes() {
    const struct statvfs st = statvfs_of();
    return uint64_t{st.f_bfree} * st.f_frsize;
  }
  void sync_all() {
    Fd root = open_file(path(), O_RDONLY | O_DIRECTORY);
    if (root.valid() && syncfs(root.get()) != 0) ADD_FAILURE() << "syncfs: " << errno_name(errno);
  }
  // Polls until free space reaches at least want, after a sync; returns the last reading.
  uint64_t wait_for_free(uint64_t want) {
    const auto deadline = std::chrono::steady_clock::now() + kReleaseTimeout;
    for (;;) {
      sync_all();
      const uint64_t now = free_bytes();
      if (now >= want || std::chrono::steady_clock::now() >= deadline) return now;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  // Writes size bytes of incompressible, non-zero data and fsyncs.
  void write_big(const std::string& file, uint64_t size) {
    Fd fd = open_file(file, O_WRONLY | O_CREAT | O_TRUNC);
    ASSERT_TRUE(fd.valid());
    Bytes chunk = random_bytes(kMiB, 1);
    for (uint64_t done = 0; done < size; done += kMiB) {
      chunk[0] = static_cast<uint8_t>(done >> 20);  // no two MiB alike
      ASSERT_TRUE(write_at(fd.get(), chunk, static_cast<off_t>(done)));
    }
    ASSERT_EQ(fsync(fd.get()), 0) << errno_name(errno);
    ASSERT_EQ(fd.close(), 0) << errno_name(errno);
  }
};

TEST_F(Space, StatfsReportsASaneFilesystem) {
  const struct statvfs st = statvfs_of();
  EXPECT_GT(st.f_bsize, 0u);
  EXPECT_GT(st.f_frsize, 0u);
  EXPECT_GT(st.f_blocks, 0u);
  EXPECT_LE(st.f_bfree, st.f_blocks);
  EXPECT_LE(st.f_bavail, st.f_bfree);
  EXPECT_GT(st.f_bfree, 0u);
  EXPECT_GT(st.f_files, 0u);
  EXPECT_LE(st.f_ffree, st.f_files);
  EXPECT_LE(st.f_favail, st.f_ffree);
  EXPECT_EQ(st.f_namemax, 255u);
  if (!fs_.is_target()) {
    struct statfs raw {};
    ASSERT_SYS(statfs(path().c_str(), &raw));
    EXPECT_EQ(raw.f_type, kFuseSuperMagic);
    EXPECT_EQ(raw.f_bsize, 4096) << "stripefs uses 4 KiB blocks";
  }
}

TEST_F(Space, FreeBlocksFollowWritesAndDeletes) {
  constexpr uint64_t kSize = 64 * kMiB;
  constexpr uint64_t kSlack = 4 * kMiB;  // metadata that may come and go with the file
  sync_all();
  const struct statvfs before = statvfs_of();
  const uint64_t free_before = uint64_t{before.f_bfree} * before.f_frsize;
  ASSERT_NO_FATAL_FAILURE(write_big(path("big"), kSize));

  const struct statvfs written = statvfs_of();
  const uint64_t free_written = uint64_t{written.f_bfree} * written.f_frsize;
  EXPECT_LE(free_written + kSize - kSlack, free_before)
      << "64 MiB written: free went from " << free_before << " to " << free_written;
  // A shared target's inode counts move with everyone else's files; only ours is exact.
  const bool exclusive = !fs_.is_target();
  if (exclusive) {
    EXPECT_LT(written.f_ffree, before.f_ffree) << "one more inode in use";
  }

  ASSERT_SYS(unlink(path("big").c_str()));
  const uint64_t free_after = wait_for_free(free_before - kSlack);
  EXPECT_GE(free_after + kSlack, free_before)
      << "after unlink: free is " << free_after << ", was " << free_before;
  if (exclusive) {
    EXPECT_EQ(statvfs_of().f_ffree, before.f_ffree) << "the inode is free again";
  }
}

TEST_F(Space, UnlinkedOpenFileReleasesItsSpaceWhenClosed) {
  constexpr uint64_t kSize = 32 * kMiB;
  constexpr uint64_t kSlack = 4 * kMiB;
  sync_all();
  const uint64_t free_before = free_bytes();
  ASSERT_NO_FATAL_FAILURE(write_big(path("held"), kSize));
  Fd fd = open_file(path("held"), O_RDONLY);
  ASSERT_TRUE(fd.valid());
  ASSERT_SYS(unlink(path("held").c_str()));
  EXPECT_EQ(read_at(fd.get(), static_cast<off_t>(kSize - kMiB), 2 * kMiB).size(), kMiB)
      << "still readable while open";
  ASSERT_EQ(fd.close(), 0);
  const uint64_t free_after = wait_for_free(free_before - kSlack);
  EXPECT_GE(free_after + kSlack, free_before);
}

// Fill the filesystem until a write reports ENOSPC; what was accepted stays; after a delete,
// writing works again.
TEST_F(Space, FullFilesystemReportsEnospcAndRecovers) {
  sync_all();
  const struct statvfs st = statvfs_of();
  const uint64_t capacity = uint64_t{st.f_blocks} * st.f_frsize;
  const uint64_t free_before = uint64_t{st.f_bfree} * st.f_frsize;
  if (free_before > kMaxFill) {
    GTEST_SKIP() << "the target has " << (free_before >> 20) << " MiB free; filling more than "
                 << (kMaxFill >> 20) << " MiB is too slow (mount a smaller tmpfs)";
  }

  const std::string filler = path("filler");
  Fd fd = open_file(filler, O_WRONLY | O_CREAT | O_TRUNC);
  ASSERT_TRUE(fd.valid());
  Bytes chunk = random_bytes(kMiB, 2);
  uint64_t accepted = 0;
  int err = 0;
  while (accepted <= capacity + 64 * kMiB) {
    chunk[0] = static_cast<uint8_t>(accepted >> 20);
    const ssize_t n = write(fd.get(), chunk.data(), chunk.size());
    if (n < 0) {
      err = errno;
      break;
    }
    accepted += static_cast<uint64_t>(n);
  }
  ASSERT_EQ(err, ENOSPC) << "after " << accepted << " bytes of a " << capacity
                         << "-byte filesystem: " << (err ? errno_name(err) : "no error at all");
  EXPECT_GE(accepted, free_before / 2) << "ENOSPC came far too early";
  EXPECT_ERRNO(ENOSPC, write(fd.get(), chunk.data(), chunk.size()));
  // Whatever a failed write did not accept is not in the file.
  EXPECT_EQ(fstat_of(fd.get()).st_size, static_cast<off_t>(accepted));
  EXPECT_EQ(fd.close(), 0) << errno_name(errno);
  EXPECT_EQ(stat_of(filler).st_size, static_cast<off_t>(accepted));

  ASSERT_SYS(unlink(filler.c_str()));
  const uint64_t free_after = wait_for_free(free_before - 4 * kMiB);
  EXPECT_GE(free_after + 4 * kMiB, free_before) << "the space came back";

  const Bytes data = random_bytes(32 * kMiB, 3);
  ASSERT_TRUE(write_file(path("after"), data));
  Fd check = open_file(path("after"), O_RDONLY);
  ASSERT_TRUE(check.valid());
  EXPECT_SYS(fsync(check.get()));
  EXPECT_TRUE(same_bytes(read_at(check.get(), 0, data.size() + 1), data));
}

}  // namespace
}  // namespace stripefs::test
