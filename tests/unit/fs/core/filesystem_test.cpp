#include <dirent.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/xattr.h>

#include <map>
#include <random>
#include <set>
#include <thread>

#include "fs/core/volume_device.hpp"
#include "unit/fs/core/fs_test_util.hpp"

namespace stripefs::test {
namespace {

using fs::kRootInode;

fs::SetAttr sized(uint64_t size) {
  fs::SetAttr change;
  change.size = size;
  return change;
}

TEST(Filesystem, WriteReadRoundTripAtOddOffsets) {
  MemoryFs t;
  const uint64_t ino = t.create(kRootInode, "f");
  std::vector<std::byte> model;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 60; ++i) {
    const uint64_t offset = rng() % (3 << 20);
    const size_t size = 1 + rng() % 300000;
    auto data = pattern(size, i);
    ASSERT_EQ(t.write(ino, offset, data).value(), size);
    if (model.size() < offset + size) model.resize(offset + size);
    std::copy(data.begin(), data.end(), model.begin() + offset);
    if (i % 7 == 0) {
      ASSERT_TRUE(t.fs->fsync(ino, false).has_value());
    }
  }
  EXPECT_EQ(t.read(ino, 0, model.size() + 100), model);
  t.remount();
  EXPECT_EQ(t.fs->getattr(ino)->size, model.size());
  EXPECT_EQ(t.read(ino, 0, model.size()), model);
  EXPECT_EQ(t.read(ino, 12345, 7),
            std::vector<std::byte>(model.begin() + 12345, model.begin() + 12352));
}

// On RAID5 the metadata journal lives on the volume and is written in whole stripes: a
// commit is padded to a stripe boundary, so committing writes no partial stripe (which
// would need the write-hole journal), and the padding never reaches replay.
TEST(Filesystem, MetadataJournalCommitsAreWholeStripes) {
  MemoryFs t;  // RAID5 of 4, 64 KiB chunks: 48-block stripes; a 768-block journal
  ASSERT_EQ(fs::journal_alignment(*t.volume, 768), 48u * 4096);
  ASSERT_EQ(fs::journal_alignment(*t.volume, 767), 0u);  // under 16 stripes: no padding
  ASSERT_TRUE(t.fs->unmount().has_value());
  t.fs.reset();
  fs::FsOptions quiet;
  quiet.commit_interval_s = 3600;  // only the fsyncs below commit
  t.mount(quiet);
  std::vector<uint64_t> files;
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < 600; ++i) {
      files.push_back(t.create(kRootInode, "f" + std::to_string(round) + "-" + std::to_string(i)));
    }
    const VolumeStats before = t.volume->stats();
    const fs::MetaStats meta_before = t.fs->meta_stats();
    ASSERT_TRUE(t.fs->fsync(kRootInode, false).has_value());
    const VolumeStats after = t.volume->stats();
    const fs::MetaStats meta_after = t.fs->meta_stats();
    EXPECT_GT(meta_after.commits, meta_before.commits);
    EXPECT_GT(after.full_stripe_writes, before.full_stripe_writes) << "round " << round;
    EXPECT_EQ(after.partial_stripe_writes, before.partial_stripe_writes) << "round " << round;
    // Enough changed blocks that the padding never outgrows the commit.
    EXPECT_GE(meta_after.journal_blocks_written - meta_before.journal_blocks_written, 48u);
  }
  EXPECT_GT(t.fs->meta_stats().journal_padding_blocks, 0u);
  t.crash_and_mount();  // replay steps over the padding
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < 600; ++i) {
      auto a = t.fs->lookup(kRootInode, "f" + std::to_string(round) + "-" + std::to_string(i));
      ASSERT_TRUE(a.has_value()) << round << "-" << i;
      EXPECT_EQ(a->ino, files[static_cast<size_t>(round * 600 + i)]);
    }
  }
}

// Every copy of file data is counted: a read partly in the cache copies the cached part, a
// read within one cached range copies nothing, and a write's partial block is completed by
// a copy of the rest of its bytes.
TEST(Filesystem, CountsEveryCopyOfFileData) {
  MemoryFs t;
  const uint64_t f = t.create(kRootInode, "f");
  const std::vector<std::byte> data = pattern(8192, 6);
  ASSERT_TRUE(t.write(f, 0, data));
  t.remount();  // nothing cached
  const std::vector<std::byte> tail = pattern(4096, 7);
  ASSERT_TRUE(t.write(f, 8192, tail));
  const fs::FsStats before = t.fs->stats();
  std::vector<std::byte> whole = data;
  whole.insert(whole.end(), tail.begin(), tail.end());
  EXPECT_TRUE(t.read(f, 0, whole.size()) == whole);  // 8 KiB from the volume, 4 from the cache
  const fs::FsStats mixed = t.fs->stats();
  EXPECT_EQ(mixed.read_copy_bytes - before.read_copy_bytes, 4096u);
  EXPECT_TRUE(t.read(f, 8192, 4096) == tail);  // within one cached range: its own buffer
  EXPECT_EQ(t.fs->stats().read_copy_bytes, mixed.read_copy_bytes);

  // 100 bytes in the middle of the first block: the other 3,996 are copied around them.
  ASSERT_TRUE(t.write(f, 50, pattern(100, 8)));
  const fs::FsStats edged = t.fs->stats();
  EXPECT_EQ(edged.edge_copy_bytes - mixed.edge_copy_bytes, 4096u - 100u);
  EXPECT_EQ(edged.bytes_copied_in - mixed.bytes_copied_in, 100u);
}

// copy_file_range shares whole aligned blocks (the source's immutable buffers, uncopied)
// and copies a partial tail; the copy keeps its contents when the source changes later,
// and after a remount.
TEST(Filesystem, CopyFileRangeSharesWholeBlocksAndCopiesTheTail) {
  MemoryFs t;
  const uint64_t src = t.create(kRootInode, "src"), dst = t.create(kRootInode, "dst");
  const std::vector<std::byte> data = pattern((3 << 20) + 100, 4);
  ASSERT_TRUE(t.write(src, 0, data));
  const fs::FsStats before = t.fs->stats();
  auto n = t.fs->copy_file_range(src, 0, dst, 0, data.size());
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_EQ(*n, data.size());
  const fs::FsStats after = t.fs->stats();
  EXPECT_EQ(after.bytes_shared - before.bytes_shared, 3u << 20);
  EXPECT_EQ(after.bytes_copied_in - before.bytes_copied_in, 100u);
  ASSERT_TRUE(t.write(src, 0, pattern(data.size(), 5)));  // the source changes
  EXPECT_TRUE(t.read(dst, 0, data.size()) == data);
  // Not aligned in the destination: copied.
  auto odd = t.fs->copy_file_range(src, 0, dst, data.size() + 1, 8192);
  ASSERT_TRUE(odd) << odd.error().message;
  EXPECT_EQ(t.fs->stats().bytes_shared, after.bytes_shared);
  t.remount();
  EXPECT_TRUE(t.read(dst, 0, data.size()) == data);
  EXPECT_TRUE(t.read(dst, data.size() + 1, 8192) == pattern(8192, 5));
}

TEST(Filesystem, DirectoryOperationsAndPersistence) {
  MemoryFs t;
  const uint64_t d = t.create(kRootInode, "dir", S_IFDIR | 0755);
  std::set<std::string> names;
  for (int i = 0; i < 3000; ++i) {
    names.insert("file-" + std::to_string(i));
    t.create(d, "file-" + std::to_string(i));
  }
  for (int i = 0; i < 3000; i += 3) {
    ASSERT_TRUE(t.fs->unlink(d, "file-" + std::to_string(i)).has_value());
    names.erase("file-" + std::to_string(i));
  }
  auto list = [&] {
    std::multiset<std::string> seen;
    uint64_t cookie = 0;
    for (;;) {
      int taken = 0;
      auto r = t.fs->readdir(d, cookie, [&](std::string_view n, uint64_t, uint8_t, uint64_t next) {
        if (taken == 100) return false;
        ++taken;
        seen.insert(std::string(n));
        cookie = next;
        return true;
      });
      EXPECT_TRUE(r.has_value());
      if (taken < 100) break;
    }
    return seen;
  };
  auto check = [&] {
    auto seen = list();
    EXPECT_EQ(seen.count("."), 1u);
    EXPECT_EQ(seen.count(".."), 1u);
    seen.erase(".");
    seen.erase("..");
    EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()), names);
    EXPECT_EQ(seen.size(), names.size());  // each exactly once
    EXPECT_EQ(t.fs->lookup(d, "file-1")->ino != 0, true);
    EXPECT_EQ(t.fs->lookup(d, "file-0").error().code, ENOENT);
  };
  check();
  t.remount();
  check();
}

// An NFS export brings back an inode from its handle by looking up "." in it, a file's too;
// any other name in a file is ENOTDIR.
TEST(Filesystem, DotOfAnyInodeIsItself) {
  MemoryFs t;
  const uint64_t f = t.create(kRootInode, "f");
  auto self = t.fs->lookup(f, ".");
  ASSERT_TRUE(self) << self.error().message;
  EXPECT_EQ(self->ino, f);
  EXPECT_EQ(self->generation, t.fs->getattr(f)->generation);
  t.fs->forget(f, 1);
  EXPECT_EQ(t.fs->lookup(f, "..").error().code, ENOTDIR);
  EXPECT_EQ(t.fs->lookup(f, "x").error().code, ENOTDIR);
}

TEST(Filesystem, ErrorsAreTheRightErrno) {
  MemoryFs t;
  const uint64_t d = t.create(kRootInode, "d", S_IFDIR | 0755);
  const uint64_t f = t.create(kRootInode, "f");
  t.create(d, "inner");
  EXPECT_EQ(t.fs->mknod(kRootInode, "f", S_IFREG | 0644, 0, t.root).error().code, EEXIST);
  EXPECT_EQ(t.fs->rmdir(kRootInode, "d").error().code, ENOTEMPTY);
  EXPECT_EQ(t.fs->rmdir(kRootInode, "f").error().code, ENOTDIR);
  EXPECT_EQ(t.fs->unlink(kRootInode, "d").error().code, EISDIR);
  EXPECT_EQ(t.fs->lookup(kRootInode, std::string(256, 'x')).error().code, ENAMETOOLONG);
  EXPECT_EQ(t.fs->mknod(kRootInode, std::string(256, 'x'), S_IFREG, 0, t.root).error().code,
            ENAMETOOLONG);
  EXPECT_EQ(t.fs->link(d, kRootInode, "dl").error().code, EPERM);
  EXPECT_EQ(t.fs->rename(kRootInode, "d", d, "moved", 0).error().code, EINVAL);
  EXPECT_EQ(t.fs->rename(kRootInode, "f", kRootInode, "d", 0).error().code, EISDIR);
  EXPECT_EQ(t.fs->rename(kRootInode, "d", kRootInode, "f", 0).error().code, ENOTDIR);
  EXPECT_EQ(
      t.fs->rename(kRootInode, "f", kRootInode, "d", fs::Filesystem::kRenameNoReplace).error().code,
      EEXIST);
  EXPECT_EQ(t.fs->getxattr(f, "user.none").error().code, ENODATA);
  EXPECT_EQ(t.fs->setxattr(f, "user.a", "1", XATTR_REPLACE).error().code, ENODATA);
  ASSERT_TRUE(t.fs->setxattr(f, "user.a", "1", XATTR_CREATE).has_value());
  EXPECT_EQ(t.fs->setxattr(f, "user.a", "1", XATTR_CREATE).error().code, EEXIST);
  // An inode's xattrs take up to kMaxXattrBlocks blocks: three 64 KiB values fit, a fourth
  // does not.
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(t.fs->setxattr(f, "user.big" + std::to_string(i), std::string(65536, 'v'), 0));
  }
  EXPECT_EQ(t.fs->setxattr(f, "user.big3", std::string(65536, 'v'), 0).error().code, ENOSPC);
  EXPECT_EQ(t.fs->setxattr(f, "bogus.a", "1", 0).error().code, EOPNOTSUPP);
}

// listxattr answers in at most 64 KiB (XATTR_LIST_MAX): names that would not fit one
// listing are refused, so every inode's names can always be listed.
TEST(Filesystem, XattrNamesStayListable) {
  MemoryFs t;
  const uint64_t f = t.create(kRootInode, "f");
  size_t listed = 0;
  int i = 0;
  for (;; ++i) {
    const std::string name = "user." + std::to_string(i) + std::string(240, 'n');
    auto r = t.fs->setxattr(f, name, "v", 0);
    if (!r) {
      EXPECT_EQ(r.error().code, ENOSPC);
      break;
    }
    listed += name.size() + 1;
    ASSERT_LT(i, 1000) << "never refused";
  }
  EXPECT_LE(listed, 65536u);
  EXPECT_GT(listed + 300, 65536u) << "refused long before the listing's limit";
  auto names = t.fs->listxattr(f);
  ASSERT_TRUE(names.has_value());
  EXPECT_EQ(names->size(), static_cast<size_t>(i));
}

TEST(Filesystem, RenameExchangeAndLinks) {
  MemoryFs t;
  const uint64_t a = t.create(kRootInode, "a");
  const uint64_t b = t.create(kRootInode, "b", S_IFDIR | 0755);
  ASSERT_TRUE(
      t.fs->rename(kRootInode, "a", kRootInode, "b", fs::Filesystem::kRenameExchange).has_value());
  EXPECT_EQ(t.fs->lookup(kRootInode, "a")->ino, b);
  EXPECT_EQ(t.fs->lookup(kRootInode, "b")->ino, a);
  ASSERT_TRUE(t.fs->link(a, b, "hard").has_value());
  EXPECT_EQ(t.fs->getattr(a)->nlink, 2u);
  ASSERT_TRUE(t.fs->unlink(kRootInode, "b").has_value());
  EXPECT_EQ(t.fs->getattr(a)->nlink, 1u);
  EXPECT_EQ(t.fs->lookup(b, "hard")->ino, a);
  // A long symlink target lives in a block of its own.
  const std::string target(3000, 't');
  auto s = t.fs->symlink(kRootInode, "s", target, t.root);
  ASSERT_TRUE(s.has_value());
  t.remount();
  EXPECT_EQ(t.fs->readlink(s->ino).value(), target);
  EXPECT_EQ(t.fs->getattr(b)->nlink, 2u);
}

TEST(Filesystem, SparseFilesHolesAndFallocate) {
  MemoryFs t;
  const uint64_t f = t.create(kRootInode, "sparse");
  auto data = pattern(8192, 1);
  const uint64_t far = 5ull << 30;
  ASSERT_TRUE(t.write(f, far, data).has_value());
  ASSERT_TRUE(t.fs->fsync(f, false).has_value());
  EXPECT_EQ(t.fs->getattr(f)->size, far + 8192);
  EXPECT_LE(t.fs->getattr(f)->blocks512, 64u);
  EXPECT_EQ(t.read(f, 4096, 4096), std::vector<std::byte>(4096));
  EXPECT_EQ(t.fs->lseek(f, 0, SEEK_DATA).value(), far);
  EXPECT_EQ(t.fs->lseek(f, far, SEEK_HOLE).value(), far + 8192);
  EXPECT_EQ(t.fs->lseek(f, 0, SEEK_HOLE).value(), 0u);
  // Punch the first page of the data: zeros there, the rest intact, fewer blocks.
  const uint64_t before = t.fs->getattr(f)->blocks512;
  ASSERT_TRUE(
      t.fs->fallocate(f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, far, 4096).has_value());
  ASSERT_TRUE(t.fs->fsync(f, false).has_value());
  EXPECT_LT(t.fs->getattr(f)->blocks512, before);
  EXPECT_EQ(t.read(f, far, 4096), std::vector<std::byte>(4096));
  EXPECT_EQ(t.read(f, far + 4096, 4096), std::vector<std::byte>(data.begin() + 4096, data.end()));
  // Preallocation: blocks counted, reads as zeros, size grows unless KEEP_SIZE.
  const uint64_t g = t.create(kRootInode, "prealloc");
  ASSERT_TRUE(t.fs->fallocate(g, 0, 0, 1 << 20).has_value());
  EXPECT_EQ(t.fs->getattr(g)->size, 1u << 20);
  EXPECT_EQ(t.fs->getattr(g)->blocks512, (1u << 20) / 512);
  EXPECT_EQ(t.read(g, 0, 4096), std::vector<std::byte>(4096));
  auto some = pattern(100, 2);
  ASSERT_TRUE(t.write(g, 10, some).has_value());
  t.remount();
  auto back = t.read(g, 0, 4096);
  EXPECT_EQ(std::vector<std::byte>(back.begin() + 10, back.begin() + 110), some);
  EXPECT_EQ(std::vector<std::byte>(back.begin(), back.begin() + 10), std::vector<std::byte>(10));
  // Truncate down then up: the cut part reads as zeros.
  ASSERT_TRUE(t.fs->setattr(g, sized(50)).has_value());
  ASSERT_TRUE(t.fs->setattr(g, sized(4096)).has_value());
  back = t.read(g, 0, 4096);
  EXPECT_EQ(std::vector<std::byte>(back.begin() + 50, back.end()),
            std::vector<std::byte>(4096 - 50));
}

TEST(Filesystem, NoSpaceLeavesAUsableFilesystem) {
  MemoryFs t(16ull << 20);
  const uint64_t f = t.create(kRootInode, "fill");
  auto chunk = pattern(1 << 20, 3);
  uint64_t written = 0;
  for (;;) {
    auto r = t.write(f, written, chunk);
    if (!r) {
      EXPECT_EQ(r.error().code, ENOSPC);
      break;
    }
    written += *r;
    ASSERT_LT(written, 64ull << 20);
  }
  ASSERT_TRUE(t.fs->fsync(f, false).has_value());
  EXPECT_GT(written, 20ull << 20);
  EXPECT_EQ(t.read(f, written - 100, 100), std::vector<std::byte>(chunk.end() - 100, chunk.end()));
  t.fs->forget(f, 1);
  ASSERT_TRUE(t.fs->unlink(kRootInode, "fill").has_value());
  const uint64_t g = t.create(kRootInode, "again");
  for (uint64_t at = 0; at < written; at += chunk.size()) {
    ASSERT_TRUE(t.write(g, at, chunk).has_value()) << at;
  }
  ASSERT_TRUE(t.fs->fsync(g, false).has_value());
  t.remount();
  EXPECT_EQ(t.read(g, 0, 4096), std::vector<std::byte>(chunk.begin(), chunk.begin() + 4096));
}

TEST(Filesystem, CrashKeepsWhatFsyncPromised) {
  MemoryFs t;
  const uint64_t kept = t.create(kRootInode, "kept");
  auto data = pattern(3 << 20, 4);
  ASSERT_TRUE(t.write(kept, 0, data).has_value());
  ASSERT_TRUE(t.fs->fsync(kept, false).has_value());
  const uint64_t lost = t.create(kRootInode, "maybe");
  ASSERT_TRUE(t.write(lost, 0, data).has_value());
  t.crash_and_mount();
  auto again = t.fs->lookup(kRootInode, "kept");
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->ino, kept);
  EXPECT_EQ(t.read(kept, 0, data.size()), data);
}

TEST(Filesystem, StreamingWritesTakeTheFullStripePath) {
  MemoryFs t(128ull << 20);
  const uint64_t f = t.create(kRootInode, "stream");
  auto chunk = pattern(1 << 20, 5);
  const VolumeStats before = t.volume->stats();
  for (int i = 0; i < 64; ++i) ASSERT_TRUE(t.write(f, uint64_t(i) << 20, chunk).has_value());
  ASSERT_TRUE(t.fs->fsync(f, false).has_value());
  const VolumeStats after = t.volume->stats();
  const uint64_t full = after.full_stripe_bytes - before.full_stripe_bytes;
  const uint64_t partial = after.partial_stripe_bytes - before.partial_stripe_bytes;
  // Data of 64 MiB, plus a little metadata from the commit.
  EXPECT_GE(full, 63ull << 20) << "partial " << partial << ", writebacks "
                               << t.fs->stats().writebacks << ", full-stripe writebacks "
                               << t.fs->stats().full_stripe_writebacks;
  EXPECT_LT(partial, 1ull << 20);
  EXPECT_EQ(t.fs->stats().bytes_copied_in, 64ull << 20);
}

}  // namespace
}  // namespace stripefs::test

namespace stripefs::test {
namespace {

// Many inodes created and forgotten between commits: every one is on disk after a remount.
TEST(Filesystem, ManyForgottenInodesSurviveARemount) {
  fs::MakeFsOptions make;
  make.inode_count = 60000;
  MemoryFs t(128ull << 20, make);
  const uint64_t d = t.create(kRootInode, "d", S_IFDIR | 0755);
  std::vector<uint64_t> inos;
  for (int i = 0; i < 40000; ++i) {
    inos.push_back(t.create(d, "n" + std::to_string(i)));
    t.fs->forget(inos.back(), 1);
  }
  t.remount();
  for (int i = 0; i < 40000; i += 997) {
    auto a = t.fs->lookup(d, "n" + std::to_string(i));
    ASSERT_TRUE(a.has_value()) << i << ": " << a.error().message;
    EXPECT_EQ(a->ino, inos[i]);
  }
}

}  // namespace
}  // namespace stripefs::test

namespace stripefs::test {
namespace {

// A file unlinked while open, then a crash: the next mount frees its blocks and inode.
TEST(Filesystem, FilesUnlinkedWhileOpenAreFreedAfterACrash) {
  MemoryFs t;
  ASSERT_TRUE(t.fs->sync().has_value());
  const fs::FsStatfs before = t.fs->statfs();
  const uint64_t f = t.create(kRootInode, "held");
  ASSERT_TRUE(t.fs->open(f).has_value());
  std::vector<std::byte> data(8 << 20, std::byte{7});
  ASSERT_TRUE(t.write(f, 0, data).has_value());
  ASSERT_TRUE(t.fs->fsync(f, false).has_value());
  ASSERT_TRUE(t.fs->unlink(kRootInode, "held").has_value());
  ASSERT_TRUE(t.fs->sync().has_value());  // the unlink is durable, the inode still open
  EXPECT_LT(t.fs->statfs().blocks_free, before.blocks_free - 2000);
  t.crash_and_mount();
  const fs::FsStatfs after = t.fs->statfs();
  EXPECT_EQ(after.files_free, before.files_free);
  EXPECT_EQ(after.blocks_free, before.blocks_free);
  EXPECT_EQ(t.fs->getattr(f).error().code, ESTALE);
}

// A file's block count holds steady while its data goes to the members: blocks promised to
// dirty data, then given to a writeback still in flight, then settled, count the same (du
// on a file being written back never dips, as on ext4). Found by tests/check 004 at RAID10.
TEST(Filesystem, BlocksCountTheSameWhileDataIsInFlight) {
  MemoryFs t;
  const uint64_t f = t.create(kRootInode, "steady");
  const uint64_t stripe = uint64_t{3} * MemoryFs::kChunk;
  ASSERT_TRUE(t.write(f, 0, pattern(5000, 1)).has_value());
  EXPECT_EQ(t.fs->getattr(f)->blocks512, 2u * 8) << "5000 bytes promise two blocks";
  for (auto& m : t.array.faulty) m->hold(MemberOp::write, {0, UINT64_MAX});
  // A whole stripe goes to writeback at once, and stays in flight.
  ASSERT_TRUE(t.write(f, stripe, pattern(stripe, 2)).has_value());
  for (int i = 0; i < 1000; ++i) {
    size_t held = 0;
    for (auto& m : t.array.faulty) held += m->held();
    if (held > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const uint64_t expected = (2 + stripe / fs::kBlockSize) * 8;
  EXPECT_EQ(t.fs->getattr(f)->blocks512, expected) << "in flight";
  for (auto& m : t.array.faulty) m->release_held();
  ASSERT_TRUE(t.fs->fsync(f, false).has_value());
  EXPECT_EQ(t.fs->getattr(f)->blocks512, expected) << "settled";
}

// The mount after a crash looks only at the inodes the orphan list names (no links left,
// written blocks past their size), not at every inode; a filesystem made before the list
// existed (format minor 0) is scanned whole, and recovers the same.
TEST(Filesystem, AfterACrashOnlyTheOrphanListIsLookedAt) {
  for (const bool listed : {true, false}) {
    SCOPED_TRACE(listed ? "with the orphan list" : "made without one");
    MemoryFs t;
    if (!listed) {
      ASSERT_TRUE(t.fs->unmount().has_value());
      t.fs.reset();
      AlignedBuffer block(fs::kBlockSize);
      ASSERT_TRUE(t.volume->read(0, block.span()).has_value());
      const auto image = std::span<std::byte, fs::kBlockSize>(block.data(), fs::kBlockSize);
      auto sb = fs::decode_fs_superblock(image);
      ASSERT_TRUE(sb.has_value());
      ASSERT_TRUE(sb->has_orphan_list());
      sb->minor = 0;
      sb->orphan_start = sb->orphan_blocks = 0;
      fs::encode_fs_superblock(*sb, image);
      ASSERT_TRUE(t.volume->write(0, block.span()).has_value());
      t.mount();
    }
    for (int i = 0; i < 300; ++i) t.create(kRootInode, ("f" + std::to_string(i)).c_str());
    ASSERT_TRUE(t.fs->sync().has_value());
    const fs::FsStatfs before = t.fs->statfs();
    const uint64_t held = t.create(kRootInode, "held");
    ASSERT_TRUE(t.fs->open(held).has_value());
    ASSERT_TRUE(t.write(held, 0, pattern(1 << 20, 4)).has_value());
    ASSERT_TRUE(t.fs->fsync(held, false).has_value());
    ASSERT_TRUE(t.fs->unlink(kRootInode, "held").has_value());
    ASSERT_TRUE(t.fs->sync().has_value());
    t.crash_and_mount();
    const fs::FsStats stats = t.fs->stats();
    EXPECT_EQ(stats.recovery_inodes_freed, 1u);
    if (listed) {
      EXPECT_EQ(stats.recovery_inodes_examined, 1u);
    } else {
      EXPECT_GE(stats.recovery_inodes_examined, 301u);
    }
    EXPECT_EQ(t.fs->statfs().blocks_free, before.blocks_free);
    EXPECT_EQ(t.fs->statfs().files_free, before.files_free);
    // Nothing is left listed: the next crash has nothing to look at.
    t.crash_and_mount();
    EXPECT_EQ(t.fs->stats().recovery_inodes_examined, listed ? 0u : 301u);
  }
}

}  // namespace
}  // namespace stripefs::test

namespace stripefs::test {
namespace {

// After a crash, a file not fsync'd holds a prefix of what was written to it: its stored
// size covers only data that reached the members, never a hole where unwritten data was.
void expect_prefix(MemoryFs& t, std::string_view name, const std::vector<std::byte>& written,
                   uint64_t at_least) {
  auto a = t.fs->lookup(kRootInode, name);
  ASSERT_TRUE(a.has_value()) << a.error().message;
  ASSERT_GE(a->size, at_least);
  ASSERT_LE(a->size, written.size());
  const auto back = t.read(a->ino, 0, a->size);
  ASSERT_EQ(back.size(), a->size);
  for (uint64_t b = 0; b < a->size; b += fs::kBlockSize) {
    const size_t n = std::min<uint64_t>(fs::kBlockSize, a->size - b);
    ASSERT_EQ(std::memcmp(back.data() + b, written.data() + b, n), 0)
        << name << ": block " << b / fs::kBlockSize << " of a file of " << a->size << " bytes";
  }
  // Blocks written back past the stored size were freed by the mount.
  EXPECT_LE(a->blocks512 * 512, (a->size + fs::kBlockSize - 1) / fs::kBlockSize * fs::kBlockSize);
}

void commit_by_fsync_of_another(MemoryFs& t) {
  const uint64_t other = t.create(kRootInode, "other");
  ASSERT_TRUE(t.write(other, 0, pattern(4096, 9)).has_value());
  ASSERT_TRUE(t.fs->fsync(other, false).has_value());
}

TEST(Filesystem, CrashLeavesAPrefixOfAnAppendedFile) {
  MemoryFs t;
  const uint64_t f = t.create(kRootInode, "log");
  const auto data = pattern((3 << 20) + 5000, 21);
  ASSERT_TRUE(t.write(f, 0, std::span(data).first(1 << 20)).has_value());
  ASSERT_TRUE(t.fs->fsync(f, false).has_value());
  // Whole stripes of the append go out at once; its tail stays in the cache.
  ASSERT_TRUE(t.write(f, 1 << 20, std::span(data).subspan(1 << 20)).has_value());
  commit_by_fsync_of_another(t);
  t.crash_and_mount();
  expect_prefix(t, "log", data, 1 << 20);
}

TEST(Filesystem, CrashDoesNotExposeHolesBeforeDataWrittenOutOfOrder) {
  MemoryFs t;
  const uint64_t stripe = uint64_t{3} * MemoryFs::kChunk;
  const uint64_t f = t.create(kRootInode, "scattered");
  std::vector<std::byte> data(9 * stripe, std::byte{0});
  const auto head = pattern(4096, 22), body = pattern(8 * stripe, 23);
  std::memcpy(data.data(), head.data(), head.size());
  std::memcpy(data.data() + stripe, body.data(), body.size());
  // The head stays cached; the whole stripes after it are written back now, before it.
  ASSERT_TRUE(t.write(f, 0, head).has_value());
  ASSERT_TRUE(t.write(f, stripe, body).has_value());
  for (int i = 0; i < 1000 && t.fs->stats().writeback_done_bytes < body.size(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GE(t.fs->stats().writeback_done_bytes, body.size());
  commit_by_fsync_of_another(t);
  t.crash_and_mount();
  expect_prefix(t, "scattered", data, 0);
  // Its blocks past the stored size put it on the orphan list, which is all the mount read.
  EXPECT_LE(t.fs->stats().recovery_inodes_examined, 2u);
}

TEST(Filesystem, CrashKeepsTheSizeOfAFileOverwrittenInPlace) {
  MemoryFs t;
  const uint64_t f = t.create(kRootInode, "rewritten");
  const auto data = pattern(1 << 20, 24);
  ASSERT_TRUE(t.write(f, 0, data).has_value());
  ASSERT_TRUE(t.fs->fsync(f, false).has_value());
  ASSERT_TRUE(t.write(f, 512 << 10, pattern(4096, 25)).has_value());
  // Straddling the end: the stored size stays, it does not fall back to this write's start.
  ASSERT_TRUE(t.write(f, data.size() - 4096, pattern(8192, 27)).has_value());
  commit_by_fsync_of_another(t);
  t.crash_and_mount();
  auto a = t.fs->lookup(kRootInode, "rewritten");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->size, data.size());
  EXPECT_EQ(t.read(f, 0, 512 << 10),
            std::vector<std::byte>(data.begin(), data.begin() + (512 << 10)));
}

// The mount after a crash frees what many files hold past their size, committing whenever
// the transaction grows to a quarter of a small journal: right after an inode's range, too.
// Such a commit stores the inode, and nothing holds it then (no lookups, no opens): it must
// stay in memory until its recovery is done with it, not be evicted under it (a use after
// free, which ASan reports without the guard).
TEST(Filesystem, CrashRecoveryOfManyFilesPastTheirSizeCommitsBetweenThem) {
  fs::MakeFsOptions make;
  make.journal_blocks = 256;  // the smallest: commits every 64 changed blocks or inodes
  MemoryFs t(64ull << 20, make);
  const uint64_t stripe = uint64_t{3} * MemoryFs::kChunk;
  const fs::FsStatfs before = t.fs->statfs();
  constexpr int kFiles = 100;
  std::vector<uint64_t> files;
  for (int i = 0; i < kFiles; ++i) {
    const uint64_t f = t.create(kRootInode, ("f" + std::to_string(i)).c_str());
    files.push_back(f);
    // The head stays cached; two whole stripes apart from each other go out at once: two
    // extents past the size that a crash leaves stored.
    ASSERT_TRUE(t.write(f, 0, pattern(4096, 100 + i)).has_value());
    ASSERT_TRUE(t.write(f, stripe, pattern(stripe, 200 + i)).has_value());
    ASSERT_TRUE(t.write(f, 3 * stripe, pattern(stripe, 300 + i)).has_value());
  }
  const uint64_t written_back = uint64_t{kFiles} * 2 * stripe;
  for (int i = 0; i < 2000 && t.fs->stats().writeback_done_bytes < written_back; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_GE(t.fs->stats().writeback_done_bytes, written_back);
  commit_by_fsync_of_another(t);
  t.crash_and_mount();
  EXPECT_GE(t.fs->stats().recovery_inodes_examined, uint64_t{kFiles});
  for (int i = 0; i < kFiles; ++i) {
    const std::string name = "f" + std::to_string(i);
    auto a = t.fs->lookup(kRootInode, name);
    ASSERT_TRUE(a.has_value()) << name << ": " << a.error().message;
    EXPECT_EQ(a->ino, files[i]) << name;
    EXPECT_EQ(a->size, 0u) << name;
    EXPECT_EQ(a->blocks512, 0u) << name << ": its blocks past the size were freed";
  }
  // Every block freed once: the counts kept since the recovery agree with the bitmaps, as a
  // clean remount counts them afresh.
  const fs::FsStatfs recovered = t.fs->statfs();
  EXPECT_EQ(recovered.files_free, before.files_free - kFiles - 1);  // the files and "other"
  t.remount();
  EXPECT_EQ(t.fs->statfs().blocks_free, recovered.blocks_free);
  EXPECT_EQ(t.fs->statfs().files_free, recovered.files_free);
}

// Written back and committed without an fsync of the file: the whole size is stored.
TEST(Filesystem, TheWholeSizeIsStoredOnceTheDataIsWrittenBack) {
  MemoryFs t;
  const uint64_t f = t.create(kRootInode, "later");
  const auto data = pattern((2 << 20) + 123, 26);
  ASSERT_TRUE(t.write(f, 0, data).has_value());
  commit_by_fsync_of_another(t);  // stored short: the tail is still cached
  ASSERT_TRUE(t.fs->sync().has_value());
  t.crash_and_mount();
  auto a = t.fs->lookup(kRootInode, "later");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->size, data.size());
  EXPECT_EQ(t.read(f, 0, data.size()), data);
}

}  // namespace
}  // namespace stripefs::test
