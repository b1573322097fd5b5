// Holes: sparse files, SEEK_DATA and SEEK_HOLE, and fallocate's modes.
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mounted/mounted_fixture.hpp"

namespace stripefs::test {
namespace {

class Sparse : public MountedTest {};

// Far beyond the 768 MiB a default stripefs holds: only the written block is stored.
TEST_F(Sparse, FileWrittenAt5GiBStoresOnlyWhatWasWritten) {
  constexpr off_t kTail = static_cast<off_t>(5 * kGiB + 123);
  const Bytes tail = random_bytes(4096, 9);
  Fd fd = open_file(path("sparse"), O_RDWR | O_CREAT | O_TRUNC);
  ASSERT_TRUE(fd.valid());
  ASSERT_TRUE(write_at(fd.get(), tail, kTail));
  ASSERT_EQ(fsync(fd.get()), 0);

  const struct stat st = fstat_of(fd.get());
  EXPECT_EQ(st.st_size, kTail + 4096);
  EXPECT_LE(st.st_blocks * 512, static_cast<blkcnt_t>(kMiB)) << "the hole takes no space";
  EXPECT_GT(st.st_blocks, 0) << "the written data takes some";

  for (off_t offset : {off_t{0}, off_t{kGiB}, off_t{4 * kGiB + 12345}}) {
    const Bytes hole = read_at(fd.get(), offset, 64 * kKiB);
    EXPECT_EQ(hole.size(), 64 * kKiB);
    EXPECT_TRUE(all_zero(hole)) << "at " << offset;
  }
  // A read across the boundary: zeros, then exactly the data, then end of file.
  const Bytes across = read_at(fd.get(), kTail - 1000, 10000);
  ASSERT_EQ(across.size(), 1000u + 4096u);
  EXPECT_TRUE(all_zero(Bytes(across.begin(), across.begin() + 1000)));
  EXPECT_TRUE(same_bytes(Bytes(across.begin() + 1000, across.end()), tail));
}

// Data at [1 MiB, 1 MiB + 64 KiB) and [4 MiB, 4 MiB + 4 KiB) of an 8 MiB file; the rest holes.
// Asked both before and after the data reaches the disk.
TEST_F(Sparse, SeekDataAndSeekHoleFindTheExtents) {
  constexpr off_t kFirst = static_cast<off_t>(kMiB);
  constexpr off_t kFirstEnd = kFirst + static_cast<off_t>(64 * kKiB);
  constexpr off_t kSecond = static_cast<off_t>(4 * kMiB);
  constexpr off_t kSecondEnd = kSecond + 4096;
  constexpr off_t kSize = static_cast<off_t>(8 * kMiB);
  Fd fd = open_file(path("holes"), O_RDWR | O_CREAT | O_TRUNC);
  ASSERT_TRUE(fd.valid());
  ASSERT_SYS(ftruncate(fd.get(), kSize));
  ASSERT_TRUE(write_at(fd.get(), random_bytes(kFirstEnd - kFirst, 1), kFirst));
  ASSERT_TRUE(write_at(fd.get(), random_bytes(kSecondEnd - kSecond, 2), kSecond));

  for (const char* when : {"before fsync", "after fsync"}) {
    SCOPED_TRACE(when);
    EXPECT_EQ(lseek(fd.get(), 0, SEEK_DATA), kFirst);
    EXPECT_EQ(lseek(fd.get(), kFirst + 100, SEEK_DATA), kFirst + 100);
    EXPECT_EQ(lseek(fd.get(), 0, SEEK_HOLE), 0);
    EXPECT_EQ(lseek(fd.get(), kFirst, SEEK_HOLE), kFirstEnd);
    EXPECT_EQ(lseek(fd.get(), kFirstEnd, SEEK_DATA), kSecond);
    EXPECT_EQ(lseek(fd.get(), kSecond, SEEK_HOLE), kSecondEnd);
    EXPECT_EQ(lseek(fd.get(), 6 * kMiB, SEEK_HOLE), static_cast<off_t>(6 * kMiB));
    EXPECT_ERRNO(ENXIO, lseek(fd.get(), kSecondEnd, SEEK_DATA));  // only a hole is left
    EXPECT_ERRNO(ENXIO, lseek(fd.get(), kSize, SEEK_DATA));
    EXPECT_ERRNO(ENXIO, lseek(fd.get(), kSize, SEEK_HOLE));
    ASSERT_EQ(fsync(fd.get()), 0);
  }

  // A file without holes: all data, with the implicit hole at its end.
  Fd dense = open_file(path("dense"), O_RDWR | O_CREAT | O_TRUNC);
  ASSERT_TRUE(dense.valid());
  ASSERT_TRUE(write_at(dense.get(), random_bytes(10000, 3), 0));
  EXPECT_EQ(lseek(dense.get(), 0, SEEK_DATA), 0);
  EXPECT_EQ(lseek(dense.get(), 0, SEEK_HOLE), 10000);
  EXPECT_EQ(lseek(dense.get(), 9999, SEEK_HOLE), 10000);
  EXPECT_ERRNO(ENXIO, lseek(dense.get(), 10000, SEEK_DATA));
}

TEST_F(Sparse, FallocateAllocatesAndExtends) {
  Fd fd = open_file(path("file"), O_RDWR | O_CREAT | O_TRUNC);
  ASSERT_TRUE(fd.valid());
  const off_t length = static_cast<off_t>(kMiB + 100);
  ASSERT_SYS(fallocate(fd.get(), 0, 0, length));
  const struct stat st = fstat_of(fd.get());
  EXPECT_EQ(st.st_size, length);
  EXPECT_GE(st.st_blocks * 512, length) << "the range is allocated";
  EXPECT_TRUE(all_zero(read_at(fd.get(), 0, static_cast<size_t>(length))));

  // Allocating over data keeps it; allocating inside the file keeps the size.
  const Bytes data = random_bytes(8192, 4);
  ASSERT_TRUE(write_at(fd.get(), data, 5000));
  ASSERT_SYS(fallocate(fd.get(), 0, 0, 4 * 4096));
  EXPECT_EQ(fstat_of(fd.get()).st_size, length);
  EXPECT_TRUE(same_bytes(read_at(fd.get(), 5000, 8192), data));
}

TEST_F(Sparse, FallocateKeepSizeAllocatesWithoutGrowing) {
  Fd fd = open_file(path("file"), O_RDWR | O_CREAT | O_TRUNC);
  ASSERT_TRUE(fd.valid());
  ASSERT_SYS(fallocate(fd.get(), FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(kMiB)));
  struct stat st = fstat_of(fd.get());
  EXPECT_EQ(st.st_size, 0);
  EXPECT_GE(st.st_blocks * 512, static_cast<blkcnt_t>(kMiB));
  EXPECT_TRUE(read_at(fd.get(), 0, 4096).empty());

  ASSERT_TRUE(write_at(fd.get(), to_bytes("0123456789"), 0));
  st = fstat_of(fd.get());
  EXPECT_EQ(st.st_size, 10);
  EXPECT_TRUE(same_bytes(read_at(fd.get(), 0, 4096), to_bytes("0123456789")));
  // Growing into the preallocated range reads zeros.
  ASSERT_SYS(ftruncate(fd.get(), 100000));
  const Bytes grown = read_at(fd.get(), 10, 100000);
  EXPECT_EQ(grown.size(), 100000u - 10);
  EXPECT_TRUE(all_zero(grown));
}

TEST_F(Sparse, PunchHoleZeroesTheRangeAndFreesBlocks) {
  const Bytes original = random_bytes(kMiB, 5);
  Fd fd = open_file(path("file"), O_RDWR | O_CREAT | O_TRUNC);
  ASSERT_TRUE(fd.valid());
  ASSERT_TRUE(write_at(fd.get(), original, 0));
  ASSERT_EQ(fsync(fd.get()), 0);
  const blkcnt_t before = fstat_of(fd.get()).st_blocks;

  constexpr off_t kStart = static_cast<off_t>(256 * kKiB);
  constexpr off_t kLength = static_cast<off_t>(512 * kKiB);
  ASSERT_SYS(fallocate(fd.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, kStart, kLength));
  ASSERT_EQ(fsync(fd.get()), 0);
  const struct stat st = fstat_of(fd.get());
  EXPECT_EQ(st.st_size, static_cast<off_t>(kMiB));
  EXPECT_LE(st.st_blocks, before - kLength / 512) << "the punched blocks are freed";

  Bytes want = original;
  std::fill(want.begin() + kStart, want.begin() + kStart + kLength, 0);
  EXPECT_TRUE(same_bytes(read_at(fd.get(), 0, kMiB + 1), want));
  EXPECT_EQ(lseek(fd.get(), kStart, SEEK_HOLE), kStart);
  EXPECT_EQ(lseek(fd.get(), kStart, SEEK_DATA), kStart + kLength);

  // Unaligned: partial blocks are zeroed, their neighbours untouched.
  ASSERT_SYS(fallocate(fd.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 100, 5000));
  std::fill(want.begin() + 100, want.begin() + 5100, 0);
  EXPECT_TRUE(same_bytes(read_at(fd.get(), 0, kMiB + 1), want));

  // Past the end, nothing grows.
  ASSERT_SYS(fallocate(fd.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                       static_cast<off_t>(kMiB - 10), static_cast<off_t>(kMiB)));
  EXPECT_EQ(fstat_of(fd.get()).st_size, static_cast<off_t>(kMiB));
  // Linux requires KEEP_SIZE with PUNCH_HOLE.
  EXPECT_ERRNO(EOPNOTSUPP, fallocate(fd.get(), FALLOC_FL_PUNCH_HOLE, 0, 4096));
}

TEST_F(Sparse, ZeroRangeZeroesAndMayExtend) {
  const Bytes original = random_bytes(64 * kKiB, 6);
  Fd fd = open_file(path("file"), O_RDWR | O_CREAT | O_TRUNC);
  ASSERT_TRUE(fd.valid());
  ASSERT_TRUE(write_at(fd.get(), original, 0));

  if (fallocate(fd.get(), FALLOC_FL_ZERO_RANGE, 1000, 20000) != 0) {
    const int err = errno;
    if (target_lacks(err)) GTEST_SKIP() << "the target has no FALLOC_FL_ZERO_RANGE";
    FAIL() << "fallocate ZERO_RANGE: " << errno_name(err);
  }
  Bytes want = original;
  std::fill(want.begin() + 1000, want.begin() + 21000, 0);
  EXPECT_TRUE(same_bytes(read_at(fd.get(), 0, want.size() + 1), want));

  // Beyond the end: the size follows unless KEEP_SIZE says otherwise.
  const off_t end = static_cast<off_t>(original.size());
  ASSERT_SYS(fallocate(fd.get(), FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, end, 8192));
  EXPECT_EQ(fstat_of(fd.get()).st_size, end);
  ASSERT_SYS(fallocate(fd.get(), FALLOC_FL_ZERO_RANGE, end, 8192));
  EXPECT_EQ(fstat_of(fd.get()).st_size, end + 8192);
  want.resize(want.size() + 8192, 0);
  EXPECT_TRUE(same_bytes(read_at(fd.get(), 0, want.size() + 1), want));
}

}  // namespace
}  // namespace stripefs::test
