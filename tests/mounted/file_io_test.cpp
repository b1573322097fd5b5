// Opening, reading, writing and truncating regular files, as POSIX and Linux specify them.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <random>

#include "mounted/mounted_fixture.hpp"

namespace stripefs::test {
namespace {

class FileIo : public MountedTest {};

TEST_F(FileIo, CreateExclusiveRefusesEveryExistingName) {
  const std::string file = path("file");
  Fd fd = open_file(file, O_RDWR | O_CREAT | O_EXCL);
  ASSERT_TRUE(fd.valid());
  ASSERT_TRUE(write_at(fd.get(), to_bytes("kept"), 0));
  EXPECT_ERRNO(EEXIST, open(file.c_str(), O_RDWR | O_CREAT | O_EXCL, 0644));

  ASSERT_SYS(mkdir(path("dir").c_str(), 0755));
  EXPECT_ERRNO(EEXIST, open(path("dir").c_str(), O_RDWR | O_CREAT | O_EXCL, 0644));

  // O_EXCL does not follow a symlink: even a dangling one is an existing name.
  ASSERT_SYS(symlink("target", path("dangling").c_str()));
  EXPECT_ERRNO(EEXIST, open(path("dangling").c_str(), O_RDWR | O_CREAT | O_EXCL, 0644));
  EXPECT_ERRNO(ENOENT, access(path("target").c_str(), F_OK));

  // Without O_EXCL, O_CREAT opens what is there, and creates a dangling link's target.
  Fd again = open_file(file, O_RDWR | O_CREAT);
  ASSERT_TRUE(again.valid());
  EXPECT_TRUE(same_bytes(read_at(again.get(), 0, 100), to_bytes("kept")));
  Fd through = open_file(path("dangling"), O_RDWR | O_CREAT);
  EXPECT_TRUE(through.valid());
  EXPECT_TRUE(S_ISREG(lstat_of(path("target")).st_mode));
}

TEST_F(FileIo, OpenMissingOrThroughFileFails) {
  EXPECT_ERRNO(ENOENT, open(path("missing").c_str(), O_RDONLY));
  EXPECT_ERRNO(ENOENT, open(path("no/such/dir").c_str(), O_RDWR | O_CREAT, 0644));
  ASSERT_TRUE(write_file(path("file"), to_bytes("x")));
  EXPECT_ERRNO(ENOTDIR, open(path("file/child").c_str(), O_RDWR | O_CREAT, 0644));
  EXPECT_ERRNO(ENOTDIR, open(path("file").c_str(), O_RDONLY | O_DIRECTORY));
  ASSERT_SYS(mkdir(path("dir").c_str(), 0755));
  EXPECT_ERRNO(EISDIR, open(path("dir").c_str(), O_WRONLY));
}

TEST_F(FileIo, TruncateOnOpenEmptiesTheFile) {
  const std::string file = path("file");
  ASSERT_TRUE(write_file(file, random_bytes(3 * 4096 + 17, 1)));
  Fd fd = open_file(file, O_RDWR | O_TRUNC);
  ASSERT_TRUE(fd.valid());
  const struct stat st = fstat_of(fd.get());
  EXPECT_EQ(st.st_size, 0);
  EXPECT_EQ(st.st_blocks, 0) << "no blocks should stay allocated to an empty file";
  EXPECT_TRUE(read_at(fd.get(), 0, 4096).empty());
  ASSERT_TRUE(write_at(fd.get(), to_bytes("new"), 0));
  ASSERT_EQ(fd.close(), 0);
  EXPECT_TRUE(same_bytes(read_file(file), to_bytes("new")));
}

TEST_F(FileIo, AppendWritesAlwaysLandAtTheEnd) {
  const std::string file = path("log");
  ASSERT_TRUE(write_file(file, to_bytes("abc")));
  Fd first = open_file(file, O_WRONLY | O_APPEND);
  Fd second = open_file(file, O_WRONLY | O_APPEND);
  ASSERT_TRUE(first.valid() && second.valid());
  ASSERT_SYS(lseek(first.get(), 0, SEEK_SET));
  ASSERT_EQ(write(first.get(), "def", 3), 3);
  EXPECT_EQ(lseek(first.get(), 0, SEEK_CUR), 6);
  ASSERT_EQ(write(second.get(), "1", 1), 1);
  ASSERT_EQ(write(first.get(), "2", 1), 1);
  ASSERT_EQ(write(second.get(), "3", 1), 1);
  EXPECT_EQ(lseek(second.get(), 0, SEEK_CUR), 9);
  EXPECT_TRUE(same_bytes(read_file(file), to_bytes("abcdef123")));
}

TEST_F(FileIo, ReadsStopAtEndOfFile) {
  const std::string file = path("file");
  ASSERT_TRUE(write_file(file, to_bytes("0123456789")));
  Fd fd = open_file(file, O_RDONLY);
  ASSERT_TRUE(fd.valid());
  char buffer[100];
  EXPECT_EQ(pread(fd.get(), buffer, sizeof(buffer), 5), 5);
  EXPECT_EQ(pread(fd.get(), buffer, sizeof(buffer), 10), 0);
  EXPECT_EQ(pread(fd.get(), buffer, sizeof(buffer), 1 << 20), 0);
  EXPECT_EQ(read(fd.get(), buffer, 4), 4);
  EXPECT_EQ(read(fd.get(), buffer, sizeof(buffer)), 6);
  EXPECT_EQ(std::string(buffer, 6), "456789");
  EXPECT_EQ(read(fd.get(), buffer, sizeof(buffer)), 0);
}

// Sizes and offsets around the 4 KiB block and across many blocks, each checked alone and
// against a model of the whole file.
TEST_F(FileIo, WritesOfManySizesAndOffsetsReadBack) {
  struct Piece {
    size_t size;
    off_t offset;
  };
  const Piece pieces[] = {
      {1, 0},
      {1, 4095},
      {1, 4096},
      {4095, 1},
      {4095, 8193},
      {4096, 4096},
      {4097, 4095},
      {4097, 12288},
      {8191, 20001},
      {65537, 33333},
      {kMiB + 3, 7},
      {kMiB + 3, 3 * kMiB - 1},
      {3 * 4096, 5 * 4096 + 2048},
      {100, 6 * kMiB},
  };
  const std::string file = path("file");
  Fd fd = open_file(file, O_RDWR | O_CREAT | O_TRUNC);
  ASSERT_TRUE(fd.valid());
  Bytes model;
  uint64_t seed = 100;
  for (const Piece& piece : pieces) {
    const Bytes data = random_bytes(piece.size, ++seed);
    ASSERT_TRUE(write_at(fd.get(), data, piece.offset));
    const size_t end = static_cast<size_t>(piece.offset) + piece.size;
    if (model.size() < end) model.resize(end);
    std::copy(data.begin(), data.end(), model.begin() + piece.offset);
    EXPECT_TRUE(same_bytes(read_at(fd.get(), piece.offset, piece.size), data))
        << piece.size << " bytes at " << piece.offset;
  }
  EXPECT_EQ(fstat_of(fd.get()).st_size, static_cast<off_t>(model.size()));
  EXPECT_TRUE(same_bytes(read_at(fd.get(), 0, model.size() + 1), model));
  ASSERT_EQ(fd.close(), 0);
  EXPECT_TRUE(same_bytes(read_file(file), model)) << "after close and reopen";
}

TEST_F(FileIo, RandomWritesMatchAModel) {
  constexpr size_t kSpan = 16 * kMiB;
  std::mt19937_64 rng(42);
  const std::string file = path("random");
  Fd fd = open_file(file, O_RDWR | O_CREAT | O_TRUNC);
  ASSERT_TRUE(fd.valid());
  Bytes model;
  for (int i = 0; i < 300; ++i) {
    // Mostly small writes, some large, at any byte offset.
    const size_t size = (i % 10 == 0) ? 1 + rng() % (512 * kKiB) : 1 + rng() % 9000;
    const size_t offset = rng() % (kSpan - size);
    const Bytes data = random_bytes(size, rng());
    ASSERT_TRUE(write_at(fd.get(), data, static_cast<off_t>(offset)));
    if (model.size() < offset + size) model.resize(offset + size);
    std::copy(data.begin(), data.end(), model.begin() + static_cast<ptrdiff_t>(offset));
  }
  for (int i = 0; i < 200; ++i) {
    const size_t offset = rng() % model.size();
    const size_t size = 1 + rng() % 70000;
    const size_t expected = std::min(size, model.size() - offset);
    const Bytes want(model.begin() + static_cast<ptrdiff_t>(offset),
                     model.begin() + static_cast<ptrdiff_t>(offset + expected));
    ASSERT_TRUE(same_bytes(read_at(fd.get(), static_cast<off_t>(offset), size), want))
        << size << " bytes at " << offset;
  }
  ASSERT_EQ(fsync(fd.get()), 0);
  ASSERT_EQ(fd.close(), 0);
  EXPECT_TRUE(same_bytes(read_file(file), model));
}

TEST_F(FileIo, WritingPastTheEndLeavesZeros) {
  const std::string file = path("gap");
  Fd fd = open_file(file, O_RDWR | O_CREAT | O_TRUNC);
  ASSERT_TRUE(fd.valid());
  ASSERT_TRUE(write_at(fd.get(), to_bytes("abc"), 0));
  ASSERT_TRUE(write_at(fd.get(), to_bytes("xyz"), 10000));
  EXPECT_EQ(fstat_of(fd.get()).st_size, 10003);
  const Bytes all = read_at(fd.get(), 0, 20000);
  ASSERT_EQ(all.size(), 10003u);
  EXPECT_TRUE(all_zero(Bytes(all.begin() + 3, all.begin() + 10000)));
  EXPECT_TRUE(same_bytes(Bytes(all.begin() + 10000, all.end()), to_bytes("xyz")));
}

// A shrink must forget the bytes beyond the new end, even inside the last block, so that a
// later grow reads zeros there rather than the old data.
TEST_F(FileIo, TruncateShrinkThenGrowReadsZeros) {
  const std::string file = path("file");
  const Bytes original = random_bytes(5 * 4096 + 100, 7);
  Fd fd = open_file(file, O_RDWR | O_CREAT | O_TRUNC);
  ASSERT_TRUE(fd.valid());
  ASSERT_TRUE(write_at(fd.get(), original, 0));
  ASSERT_EQ(fsync(fd.get()), 0);

  for (off_t cut : {off_t{3 * 4096 + 3000}, off_t{4097}, off_t{3000}}) {
    ASSERT_SYS(ftruncate(fd.get(), cut));
    EXPECT_EQ(fstat_of(fd.get()).st_size, cut);
    EXPECT_TRUE(same_bytes(read_at(fd.get(), 0, original.size()),
                           Bytes(original.begin(), original.begin() + cut)));
  }
  ASSERT_SYS(ftruncate(fd.get(), 6 * 4096));
  EXPECT_EQ(fstat_of(fd.get()).st_size, 6 * 4096);
  const Bytes grown = read_at(fd.get(), 0, 6 * 4096);
  ASSERT_EQ(grown.size(), 6u * 4096);
  EXPECT_TRUE(same_bytes(Bytes(grown.begin(), grown.begin() + 3000),
                         Bytes(original.begin(), original.begin() + 3000)));
  EXPECT_TRUE(all_zero(Bytes(grown.begin() + 3000, grown.end())));

  // The same through a path and after the data reached the disk.
  ASSERT_EQ(fsync(fd.get()), 0);
  ASSERT_SYS(truncate(file.c_str(), 10));
  ASSERT_SYS(truncate(file.c_str(), 8192));
  const Bytes again = read_file(file);
  ASSERT_EQ(again.size(), 8192u);
  EXPECT_TRUE(same_bytes(Bytes(again.begin(), again.begin() + 10),
                         Bytes(original.begin(), original.begin() + 10)));
  EXPECT_TRUE(all_zero(Bytes(again.begin() + 10, again.end())));

  ASSERT_SYS(ftruncate(fd.get(), 0));
  EXPECT_EQ(fstat_of(fd.get()).st_size, 0);
  EXPECT_EQ(fstat_of(fd.get()).st_blocks, 0);
}

TEST_F(FileIo, CopyFileRangeCopiesTheRange) {
  const Bytes source = random_bytes(kMiB + 5, 11);
  ASSERT_TRUE(write_file(path("src"), source));
  ASSERT_TRUE(write_file(path("dst"), Bytes(100, 'z')));
  Fd in = open_file(path("src"), O_RDONLY);
  Fd out = open_file(path("dst"), O_RDWR);
  ASSERT_TRUE(in.valid() && out.valid());

  constexpr size_t kLength = 600'000;
  off_t in_offset = 7;
  off_t out_offset = 50;
  size_t copied = 0;
  while (copied < kLength) {
    const ssize_t n =
        copy_file_range(in.get(), &in_offset, out.get(), &out_offset, kLength - copied, 0);
    ASSERT_GT(n, 0) << "copy_file_range after " << copied << " bytes: " << errno_name(errno);
    copied += static_cast<size_t>(n);
  }
  EXPECT_EQ(in_offset, static_cast<off_t>(7 + kLength));
  EXPECT_EQ(out_offset, static_cast<off_t>(50 + kLength));
  // With explicit offsets, the file offsets stay where they were.
  EXPECT_EQ(lseek(in.get(), 0, SEEK_CUR), 0);
  EXPECT_EQ(lseek(out.get(), 0, SEEK_CUR), 0);

  Bytes want(50, 'z');
  want.insert(want.end(), source.begin() + 7, source.begin() + 7 + kLength);
  EXPECT_TRUE(same_bytes(read_file(path("dst")), want));

  // Nothing to copy at or beyond the end of the source.
  off_t at_end = static_cast<off_t>(source.size());
  EXPECT_EQ(copy_file_range(in.get(), &at_end, out.get(), nullptr, 4096, 0), 0);
  // Overlapping ranges of one file are refused.
  off_t from = 0;
  off_t to = 100;
  EXPECT_ERRNO(EINVAL, copy_file_range(out.get(), &from, out.get(), &to, 4096, 0));
}

TEST_F(FileIo, FsyncAndFdatasyncSucceed) {
  Fd fd = open_file(path("file"), O_RDWR | O_CREAT | O_TRUNC);
  ASSERT_TRUE(fd.valid());
  ASSERT_TRUE(write_at(fd.get(), random_bytes(3 * kMiB + 1, 3), 1));
  EXPECT_SYS(fsync(fd.get()));
  ASSERT_TRUE(write_at(fd.get(), random_bytes(4096, 4), 5 * kMiB));
  EXPECT_SYS(fdatasync(fd.get()));
  EXPECT_SYS(fsync(fd.get()));  // nothing new to write

  Fd read_only = open_file(path("file"), O_RDONLY);
  ASSERT_TRUE(read_only.valid());
  EXPECT_SYS(fsync(read_only.get()));

  Fd dir = open_file(path(), O_RDONLY | O_DIRECTORY);
  ASSERT_TRUE(dir.valid());
  EXPECT_SYS(fsync(dir.get()));
  EXPECT_SYS(fdatasync(dir.get()));
  EXPECT_SYS(syncfs(dir.get()));
}

TEST_F(FileIo, UnlinkedOpenFileStaysUsableUntilClosed) {
  const std::string file = path("doomed");
  const Bytes first = random_bytes(64 * kKiB, 5);
  Fd fd = open_file(file, O_RDWR | O_CREAT | O_TRUNC);
  ASSERT_TRUE(fd.valid());
  ASSERT_TRUE(write_at(fd.get(), first, 0));
  const ino_t ino = fstat_of(fd.get()).st_ino;
  ASSERT_SYS(unlink(file.c_str()));

  EXPECT_ERRNO(ENOENT, access(file.c_str(), F_OK));
  const auto names = list_dir(path());
  EXPECT_EQ(std::count(names.begin(), names.end(), "doomed"), 0);
  EXPECT_EQ(fstat_of(fd.get()).st_nlink, 0u);

  const Bytes second = random_bytes(10000, 6);
  ASSERT_TRUE(write_at(fd.get(), second, 64 * kKiB + 3));
  Bytes want = first;
  want.resize(64 * kKiB + 3);
  want.insert(want.end(), second.begin(), second.end());
  EXPECT_TRUE(same_bytes(read_at(fd.get(), 0, want.size() + 10), want));
  ASSERT_SYS(ftruncate(fd.get(), 100));
  EXPECT_EQ(fstat_of(fd.get()).st_size, 100);
  EXPECT_SYS(fsync(fd.get()));

  // The name is free for a new, unrelated file.
  ASSERT_TRUE(write_file(file, to_bytes("new")));
  EXPECT_NE(stat_of(file).st_ino, ino);
  EXPECT_TRUE(same_bytes(read_at(fd.get(), 0, 1000), Bytes(want.begin(), want.begin() + 100)));
  EXPECT_EQ(fd.close(), 0);
  EXPECT_TRUE(same_bytes(read_file(file), to_bytes("new")));
}

}  // namespace
}  // namespace stripefs::test
