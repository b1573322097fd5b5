// Operations too large for one metadata transaction go in steps. The filesystem here spans
// 36 GiB (sparse member files on tmpfs) with the smallest journal, 256 blocks: allocating or
// freeing 33 GiB changes 264 bitmap blocks, which no single transaction can hold, so before
// these were done in steps each of them failed the filesystem (read-only until remount).
#include <fcntl.h>
#include <linux/falloc.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>

#include "raid/file_member.hpp"
#include "raid/io_engine.hpp"
#include "unit/fs/core/fs_test_util.hpp"

namespace stripefs::test {
namespace {

constexpr uint64_t kGiB = 1ull << 30;
constexpr uint64_t kMemberSize = 12 * kGiB;

// Members that all stop together: after a shared budget of requests, every request on every
// member fails, as when the machine stops. (Per-member failure counts would let the Volume
// carry on degraded past the first member to stop, which a restart with every member back
// would then wrongly treat as current.)
class StoppableMember final : public Member {
 public:
  StoppableMember(Member& inner, std::shared_ptr<std::atomic<int64_t>> budget)
      : Member(inner.name(), inner.size(), inner.limits()),
        inner_(inner),
        budget_(std::move(budget)) {}
  void submit(MemberRequest request) override {
    if (budget_->fetch_sub(1) <= 0) return request.done(-EIO);
    inner_.submit(std::move(request));
  }

 private:
  Member& inner_;
  std::shared_ptr<std::atomic<int64_t>> budget_;
};

struct SparseFs {
  std::string dir;
  std::unique_ptr<IoEngine> engine;
  std::vector<std::unique_ptr<FileMember>> files;
  std::shared_ptr<std::atomic<int64_t>> budget =
      std::make_shared<std::atomic<int64_t>>(INT64_MAX);  // requests until the machine stops
  std::vector<std::unique_ptr<StoppableMember>> faulty;   // over `files`
  std::unique_ptr<Volume> volume;
  std::unique_ptr<fs::Filesystem> fs;
  fs::Caller root{0, 0};

  uint64_t member_size;

  explicit SparseFs(uint64_t member_bytes = kMemberSize) : member_size(member_bytes) {
    char pattern[] = "/dev/shm/stripefs-large-XXXXXX";
    EXPECT_NE(mkdtemp(pattern), nullptr);
    dir = pattern;
    auto e = IoEngine::create(64);
    EXPECT_TRUE(e);
    engine = std::move(*e);
    std::vector<Member*> members;
    for (int i = 0; i < 4; ++i) {
      const std::string path = dir + "/m" + std::to_string(i);
      const int fd = ::open(path.c_str(), O_CREAT | O_RDWR, 0600);
      EXPECT_EQ(ftruncate(fd, static_cast<off_t>(member_size)), 0);
      ::close(fd);
      auto m = FileMember::open(path, *engine);
      EXPECT_TRUE(m) << m.error().message;
      files.push_back(std::move(*m));
      faulty.push_back(std::make_unique<StoppableMember>(*files.back(), budget));
    }
    start_volume();
    fs::MakeFsOptions make;
    make.journal_blocks = 256;  // the smallest: 1 MiB
    make.inode_count = 4096;
    auto made = fs::make_filesystem(*volume, make);
    EXPECT_TRUE(made) << made.error().message;
    mount();
  }
  void start_volume() {
    std::vector<Member*> members;
    for (auto& f : faulty) members.push_back(f.get());
    auto g = Geometry::create(RaidLevel::raid5, 4, 64 * 1024, member_size);
    auto v = Volume::create(*g, members, 0);
    EXPECT_TRUE(v) << v.error().message;
    volume = std::move(*v);
  }
  // After the next `n` requests (all members together), every request fails.
  void stop_after(uint64_t n) { budget->store(static_cast<int64_t>(n)); }
  // Power back: the members as they were when they stopped, a fresh Volume, mounted.
  void restart(fs::FsOptions options = {}) {
    fs.reset();
    volume.reset();
    budget->store(INT64_MAX);
    start_volume();
    mount(options);
  }
  uint64_t requests() const { return static_cast<uint64_t>(INT64_MAX - budget->load()); }
  ~SparseFs() {
    fs.reset();
    volume.reset();
    faulty.clear();
    files.clear();
    std::filesystem::remove_all(dir);
  }
  void mount(fs::FsOptions options = {}) {
    auto m = fs::Filesystem::mount(*volume, options);
    ASSERT_TRUE(m) << m.error().message;
    fs = std::move(*m);
  }
  uint64_t free_blocks() { return fs->statfs().blocks_free; }
};

TEST(LargeOperations, FallocateTruncateAndUnlinkOfTensOfGiBGoInSteps) {
  SparseFs t;
  ASSERT_TRUE(t.fs);
  const uint64_t free_at_start = t.free_blocks();
  auto a = t.fs->mknod(fs::kRootInode, "big", S_IFREG | 0644, 0, t.root);
  ASSERT_TRUE(a) << a.error().message;
  const uint64_t ino = a->ino;
  ASSERT_TRUE(t.fs->open(ino));
  const uint64_t size = 33 * kGiB;
  auto f = t.fs->fallocate(ino, 0, 0, size);
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_LE(t.free_blocks() + size / 4096, free_at_start);
  const uint64_t commits_before = t.fs->meta_stats().commits;
  // Truncating to 1 GiB frees 32 GiB: more bitmap blocks than the journal holds.
  fs::SetAttr shrink;
  shrink.size = kGiB;
  auto s = t.fs->setattr(ino, shrink);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->size, kGiB);
  EXPECT_GT(t.fs->meta_stats().commits, commits_before) << "one transaction cannot hold it";
  EXPECT_EQ(t.fs->getattr(ino)->blocks512, kGiB / 512);
  // Still writable (not failed), and it reads what was written.
  const std::vector<std::byte> data = pattern(8192, 3);
  auto w =
      t.fs->write(ino, kGiB - 4096, data.size(), [&](std::span<std::byte> dest) -> Result<void> {
        std::memcpy(dest.data(), data.data(), data.size());
        return {};
      });
  ASSERT_TRUE(w) << w.error().message;
  t.fs->release(ino);
  // Unlinking it frees the rest, in steps too; after a remount everything is free again.
  auto big = t.fs->fallocate(ino, 0, 0, size);  // not open: fallocate works by inode
  ASSERT_TRUE(big) << big.error().message;
  ASSERT_TRUE(t.fs->unlink(fs::kRootInode, "big"));
  t.fs->forget(ino, 1);
  ASSERT_TRUE(t.fs->unmount());
  t.fs.reset();
  t.mount();
  EXPECT_EQ(t.free_blocks(), free_at_start);
}

// The last close of a huge file unlinked while open, and a rename over a huge file, free it
// in steps as unlink does (each frees more bitmap blocks than a transaction holds).
TEST(LargeOperations, LastCloseAndRenameOverFreeHugeFilesInSteps) {
  SparseFs t;
  ASSERT_TRUE(t.fs);
  const uint64_t free_at_start = t.free_blocks();
  const uint64_t size = 33 * kGiB;
  auto a = t.fs->mknod(fs::kRootInode, "open-then-unlinked", S_IFREG | 0644, 0, t.root);
  ASSERT_TRUE(a) << a.error().message;
  ASSERT_TRUE(t.fs->open(a->ino));
  ASSERT_TRUE(t.fs->fallocate(a->ino, 0, 0, size));
  ASSERT_TRUE(t.fs->unlink(fs::kRootInode, "open-then-unlinked"));
  EXPECT_LE(t.free_blocks() + size / 4096, free_at_start) << "still open: still allocated";
  t.fs->release(a->ino);
  t.fs->forget(a->ino, 1);
  EXPECT_EQ(t.free_blocks(), free_at_start);

  auto b = t.fs->mknod(fs::kRootInode, "replaced", S_IFREG | 0644, 0, t.root);
  ASSERT_TRUE(b) << b.error().message;
  ASSERT_TRUE(t.fs->fallocate(b->ino, 0, 0, size));
  auto c = t.fs->mknod(fs::kRootInode, "newer", S_IFREG | 0644, 0, t.root);
  ASSERT_TRUE(c) << c.error().message;
  auto r = t.fs->rename(fs::kRootInode, "newer", fs::kRootInode, "replaced", 0);
  ASSERT_TRUE(r) << r.error().message;
  t.fs->forget(b->ino, 1);
  EXPECT_EQ(t.free_blocks(), free_at_start);
  auto found = t.fs->lookup(fs::kRootInode, "replaced");
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->ino, c->ino);
  ASSERT_TRUE(t.fs->unmount());
  t.fs.reset();
  t.mount();
  EXPECT_EQ(t.free_blocks(), free_at_start);
}

// The machine stops at points spread over a huge file's unlink, whose blocks are freed in
// steps: after the restart the file is either still there, whole, or gone with every block
// free again. The scan after the crash frees what the steps had not, in steps too: 60 GiB
// is 480 bitmap blocks, so after a stop early in the steps one transaction could not (the
// mount itself would fail).
TEST(LargeOperations, UnlinkInterruptedAnywhereIsFinishedAfterACrash) {
  constexpr uint64_t kBig = 60 * kGiB;
  uint64_t total = 0;  // member requests the whole unlink takes
  for (int run = 0; run <= 10; ++run) {
    SparseFs t(24 * kGiB);
    ASSERT_TRUE(t.fs);
    const uint64_t free_at_start = t.free_blocks();
    auto a = t.fs->mknod(fs::kRootInode, "big", S_IFREG | 0644, 0, t.root);
    ASSERT_TRUE(a) << a.error().message;
    ASSERT_TRUE(t.fs->fallocate(a->ino, 0, 0, kBig));
    ASSERT_TRUE(t.fs->fsync(a->ino, false));
    const uint64_t before = t.requests();
    if (run > 0) t.stop_after(total * static_cast<uint64_t>(run) / 11);
    (void)t.fs->unlink(fs::kRootInode, "big");  // fails where the machine stopped
    if (run == 0) total = t.requests() - before;
    t.restart();
    auto found = t.fs->lookup(fs::kRootInode, "big");
    if (found) {
      EXPECT_EQ(found->size, kBig) << "run " << run;
    }
    auto b = t.fs->mknod(fs::kRootInode, "after", S_IFREG | 0644, 0, t.root);
    EXPECT_TRUE(b) << "run " << run << ": still writable";
    const uint64_t expected_now = free_at_start - (found ? kBig / 4096 : 0);
    EXPECT_EQ(t.free_blocks(), expected_now) << "run " << run << ", after the recovery";
    ASSERT_TRUE(t.fs->unmount());  // and counted afresh from the bitmaps
    t.fs.reset();
    t.mount();
    const uint64_t expected = free_at_start - (found ? kBig / 4096 : 0);  // "after" is empty
    EXPECT_EQ(t.free_blocks(), expected) << "run " << run;
  }
  EXPECT_GT(total, 11u);
}

// A crash between the steps of a truncate leaves written blocks past the new size; the scan
// after an unclean mount frees them, so a file grown again reads zeros there, never the old
// data, and no block is lost.
TEST(LargeOperations, InterruptedTruncateIsFinishedAfterACrash) {
  SparseFs t;
  ASSERT_TRUE(t.fs);
  ASSERT_TRUE(t.fs->unmount());
  t.fs.reset();
  fs::FsOptions quiet;
  quiet.commit_interval_s = 3600;  // only the steps commit
  t.mount(quiet);
  const uint64_t free_at_start = t.free_blocks();
  auto a = t.fs->mknod(fs::kRootInode, "f", S_IFREG | 0644, 0, t.root);
  ASSERT_TRUE(a) << a.error().message;
  const uint64_t ino = a->ino;
  ASSERT_TRUE(t.fs->open(ino));
  // Written data, 1 MiB at every GiB of 20, then 13 GiB preallocated past the end.
  const std::vector<std::byte> data = pattern(1 << 20, 9);
  for (uint64_t g = 0; g < 20; ++g) {
    auto w =
        t.fs->write(ino, g * kGiB, data.size(), [&](std::span<std::byte> dest) -> Result<void> {
          std::memcpy(dest.data(), data.data(), data.size());
          return {};
        });
    ASSERT_TRUE(w) << w.error().message;
  }
  auto pre = t.fs->fallocate(ino, FALLOC_FL_KEEP_SIZE, 20 * kGiB, 13 * kGiB);
  ASSERT_TRUE(pre) << pre.error().message;
  ASSERT_TRUE(t.fs->fsync(ino, false));
  // The truncate frees from the end: the preallocation (committed in steps), then the
  // written extents, in a last step that the crash below loses.
  const uint64_t commits_before = t.fs->meta_stats().commits;
  fs::SetAttr shrink;
  shrink.size = 4096;
  ASSERT_TRUE(t.fs->setattr(ino, shrink));
  ASSERT_GT(t.fs->meta_stats().commits, commits_before);
  t.fs.reset();  // the crash: no unmount, the last step never committed
  t.mount(quiet);
  auto attr = t.fs->getattr(ino);
  ASSERT_TRUE(attr) << attr.error().message;
  EXPECT_EQ(attr->size, 4096u);
  auto first = t.fs->read(ino, 0, 8192);
  ASSERT_TRUE(first) << first.error().message;
  ASSERT_EQ(first->size(), 4096u);
  EXPECT_EQ(std::memcmp(first->fragments[0].data(), data.data(), 4096), 0);
  // Grown again: zeros where the old data was.
  fs::SetAttr grow;
  grow.size = 20 * kGiB;
  ASSERT_TRUE(t.fs->setattr(ino, grow));
  const std::vector<std::byte> zeros(4096);
  for (uint64_t g = 0; g < 20; ++g) {
    auto r = t.fs->read(ino, g * kGiB + (g == 0 ? 4096 : 0), 4096);
    ASSERT_TRUE(r) << r.error().message;
    ASSERT_EQ(r->size(), 4096u);
    EXPECT_EQ(std::memcmp(r->fragments[0].data(), zeros.data(), 4096), 0) << "GiB " << g;
  }
  t.fs->release(ino);
  ASSERT_TRUE(t.fs->unlink(fs::kRootInode, "f"));
  t.fs->forget(ino, 1);
  ASSERT_TRUE(t.fs->unmount());
  t.fs.reset();
  t.mount();
  EXPECT_EQ(t.free_blocks(), free_at_start) << "no block lost or freed twice";
}

}  // namespace
}  // namespace stripefs::test
