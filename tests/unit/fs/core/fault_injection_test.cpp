// Defects found in review of the filesystem core, each reproduced: races between writeback
// jobs, reservation drift, eviction during commits, inode teardown during writeback.
#include <fcntl.h>
#include <linux/falloc.h>

#include <chrono>
#include <future>
#include <random>
#include <set>
#include <thread>

#include "fs/core/data_buffers.hpp"
#include "unit/fs/core/fs_test_util.hpp"

namespace stripefs::test {
namespace {

using fs::kRootInode;

// Overwriting dirty, not-yet-allocated data gives its delalloc reservation back.
TEST(FsFaultInjection, OverwritingDirtyDataKeepsItsReservation) {
  MemoryFs t;
  const uint64_t f = t.create(kRootInode, "f");
  const uint64_t free0 = t.fs->statfs().blocks_free;
  auto block = pattern(4096, 1);
  ASSERT_TRUE(t.write(f, 0, block).has_value());
  EXPECT_EQ(t.fs->statfs().blocks_free, free0 - 1);
  ASSERT_TRUE(t.write(f, 0, block).has_value());     // same block, still dirty
  EXPECT_EQ(t.fs->statfs().blocks_free, free0 - 1);  // fails: free0 (reservation gone)
}

// ... and the drift lets writes be acknowledged that writeback then drops silently.
TEST(FsFaultInjection, DelallocDriftLosesAcknowledgedData) {
  MemoryFs t(16ull << 20);
  ASSERT_TRUE(t.fs->unmount().has_value());
  fs::FsOptions lazy;
  lazy.writeback_delay_s = 3600;  // no timer writeback during the test
  t.fs.reset();
  t.mount(lazy);
  const uint64_t a = t.create(kRootInode, "a"), b = t.create(kRootInode, "b");
  const uint64_t free0 = t.fs->statfs().blocks_free;
  auto block = pattern(4096, 2);
  // Every other block: never a full stripe, so nothing is written back early.
  const uint64_t n = free0 * 3 / 4;
  for (uint64_t i = 0; i < n; ++i) ASSERT_TRUE(t.write(a, 2 * i * 4096, block).has_value());
  for (uint64_t i = 0; i < n; ++i) ASSERT_TRUE(t.write(a, 2 * i * 4096, block).has_value());
  uint64_t accepted = 0;
  for (uint64_t i = 0; i < n; ++i) {
    if (!t.write(b, 2 * i * 4096, block)) break;
    ++accepted;
  }
  auto synced = t.fs->sync();
  if (accepted == n) {  // more accepted than the filesystem holds: sync must not say "ok"
    ASSERT_FALSE(synced.has_value()) << "1.5x the free space accepted and synced";
  }
  t.remount();
  for (uint64_t i = 0; i < accepted; i += 97) {
    ASSERT_EQ(t.read(b, 2 * i * 4096, 4096), block) << "block " << i << " of b lost";
  }
  for (uint64_t i = 0; i < n; i += 97) {
    ASSERT_EQ(t.read(a, 2 * i * 4096, 4096), block) << "block " << i << " of a lost";
  }
}

// ZERO_RANGE over holes: the edge blocks are reserved, then preallocated: never released.
TEST(FsFaultInjection, ZeroRangeLeaksReservation) {
  MemoryFs t;
  const uint64_t f = t.create(kRootInode, "z");
  ASSERT_TRUE(t.fs->sync().has_value());
  const uint64_t free0 = t.fs->statfs().blocks_free;
  ASSERT_TRUE(t.fs->fallocate(f, FALLOC_FL_ZERO_RANGE, 100, 3 * 4096).has_value());
  ASSERT_TRUE(t.fs->sync().has_value());
  const uint64_t used = t.fs->getattr(f)->blocks512 / 8;
  EXPECT_EQ(t.fs->statfs().blocks_free, free0 - used);  // fails: 2 blocks short, for good
}

// A directory header evicted from the metadata cache: dir_add's modify() of it is UB.
TEST(FsFaultInjection, DirectoryHeaderEvictedThenModified) {
  MemoryFs t;
  t.fs->unmount();
  t.fs.reset();
  fs::FsOptions small;
  small.metadata_cache_blocks = 16;
  t.mount(small);
  const uint64_t d = t.create(kRootInode, "d", S_IFDIR | 0755);
  ASSERT_TRUE(t.fs->sync().has_value());  // d's header is clean now
  const uint64_t e = t.create(kRootInode, "e", S_IFDIR | 0755);
  for (int i = 0; i < 400; ++i) t.create(e, "churn-" + std::to_string(i));
  ASSERT_TRUE(t.fs->sync().has_value());
  for (int i = 0; i < 50; ++i) t.create(d, "x" + std::to_string(i));  // crashes / corrupts
  t.remount();
  for (int i = 0; i < 50; ++i) EXPECT_TRUE(t.fs->lookup(d, "x" + std::to_string(i)).has_value());
}

// The last release of an unlinked file waits in destroy_inode; the worker's writeback_done
// destroys the same inode meanwhile: use after free on the waiting thread.
TEST(FsFaultInjection, ReleaseOfUnlinkedFileDuringWriteback) {
  MemoryFs t;
  const uint64_t f = t.create(kRootInode, "victim");
  ASSERT_TRUE(t.fs->open(f).has_value());
  for (auto& m : t.array.faulty) m->set_latency(std::chrono::milliseconds(300));
  auto data = pattern(1 << 20, 3);
  ASSERT_TRUE(t.write(f, 0, data).has_value());  // full stripes: writeback in flight now
  ASSERT_TRUE(t.fs->unlink(kRootInode, "victim").has_value());
  t.fs->forget(f, 1);
  auto done = std::async(std::launch::async, [&] { t.fs->release(f); });
  ASSERT_EQ(done.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  for (auto& m : t.array.faulty) m->set_latency(std::chrono::milliseconds(0));
  ASSERT_TRUE(t.fs->sync().has_value());
}

// Two writebacks in flight: the worker itself waits in destroy_inode for the second, whose
// completion only the worker can run.
TEST(FsFaultInjection, WorkerWaitsForItselfInDestroyInode) {
  MemoryFs t;
  const uint64_t f = t.create(kRootInode, "victim");
  ASSERT_TRUE(t.fs->open(f).has_value());
  for (auto& m : t.array.faulty) m->set_latency(std::chrono::milliseconds(300));
  auto data = pattern(1 << 20, 3);
  ASSERT_TRUE(t.write(f, 0, data).has_value());
  ASSERT_TRUE(t.write(f, 64 << 20, data).has_value());  // a second job
  ASSERT_TRUE(t.fs->unlink(kRootInode, "victim").has_value());
  t.fs->forget(f, 1);
  auto done = std::async(std::launch::async, [&] { t.fs->release(f); });
  if (done.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    ADD_FAILURE() << "deadlock: release() and the worker wait forever";
    std::_Exit(1);
  }
}

// Many metadata changes between two worker ticks: one transaction larger than the journal.
TEST(FsFaultInjection, BurstOfMkdirsOverflowsTheJournal) {
  MemoryFs t;  // default journal: 1024 blocks
  for (int i = 0; i < 1500; ++i) t.create(kRootInode, "d" + std::to_string(i), S_IFDIR | 0755);
  auto r = t.fs->sync();
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_TRUE(t.fs->mknod(kRootInode, "after", S_IFREG | 0644, 0, t.root).has_value());
}

}  // namespace
}  // namespace stripefs::test

namespace stripefs::test {
namespace {
// Blocks of a snapshot being committed are clean (dirty_ cleared) but not yet in images_:
// evicted in that window, they are re-read from their stale home location.
TEST(FsFaultInjection, BlockEvictedWhileItsCommitIsInFlight) {
  MemoryFs t;
  ASSERT_TRUE(t.fs->unmount().has_value());
  t.fs.reset();
  fs::FsOptions small;
  small.metadata_cache_blocks = 16;
  t.mount(small);
  const uint64_t d = t.create(kRootInode, "d", S_IFDIR | 0755);
  t.create(d, "first");
  for (auto& m : t.array.faulty) m->set_latency(std::chrono::milliseconds(500));
  auto committing = std::async(std::launch::async, [&] { return t.fs->fsync(d, false); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // snapshot taken, I/O slow
  for (auto& m : t.array.faulty) m->set_latency(std::chrono::milliseconds(0));
  const uint64_t e = t.create(kRootInode, "e", S_IFDIR | 0755);
  for (int i = 0; i < 100; ++i) t.create(e, "churn-" + std::to_string(i));  // evicts d's blocks
  auto again = t.fs->mknod(d, "second", S_IFREG | 0644, 0, t.root);
  EXPECT_TRUE(again.has_value()) << again.error().message;
  EXPECT_TRUE(committing.get().has_value());
  EXPECT_TRUE(t.fs->lookup(d, "first").has_value());
}
}  // namespace
}  // namespace stripefs::test

namespace stripefs::test {
namespace {
// Job 1 (older data for stripes X and Y) waits for X's lock; job 2 (newer data, stripe Y
// only) takes Y at once and finishes first; job 1 then overwrites Y with the older data.
TEST(FsFaultInjection, OlderWritebackLandsAfterNewerOne) {
  MemoryFs t;
  const uint64_t f = t.create(kRootInode, "f");
  const size_t stripe = 3 * MemoryFs::kChunk;  // RAID5 of 4: 192 KiB, 48 blocks
  for (auto& m : t.array.faulty) m->set_latency(std::chrono::milliseconds(300));
  ASSERT_TRUE(t.write(f, 0, pattern(stripe, 1)).has_value());  // job 0 holds stripe X
  auto older = pattern(2 * stripe, 2);
  ASSERT_TRUE(t.write(f, 0, older).has_value());  // job 1: X (queued) and Y
  auto newer = pattern(4096, 3);
  ASSERT_TRUE(t.write(f, stripe, newer).has_value());  // dirty again, over job 1's range
  ASSERT_TRUE(t.fs->fsync(f, false).has_value());      // job 2: Y only, runs first
  for (auto& m : t.array.faulty) m->set_latency(std::chrono::milliseconds(0));
  EXPECT_EQ(t.read(f, stripe, 4096), newer);
  t.remount();
  EXPECT_EQ(t.read(f, stripe, 4096), newer);
}
}  // namespace
}  // namespace stripefs::test

namespace stripefs::test {
namespace {
// One write buffer split by a full-stripe writeback (job B: its middle) and a later fsync
// (job C: its head and tail). C completes first and erases B's in-flight pieces too (same
// buffer, and C's range is [0, MAX)): reads fall through to the volume's older data.
TEST(FsFaultInjection, EarlierCompletionDropsAnotherJobsInFlightPieces) {
  MemoryFs t;
  const uint64_t f = t.create(kRootInode, "f");
  const uint64_t stripe = 3 * MemoryFs::kChunk;
  using namespace std::chrono;
  for (auto& m : t.array.faulty) m->set_latency(milliseconds(500));
  const auto start = steady_clock::now();
  ASSERT_TRUE(t.write(f, stripe, pattern(4 * stripe, 1)).has_value());  // job A
  ASSERT_TRUE(t.write(f, stripe, pattern(4 * stripe, 2)).has_value());  // job A2, after A
  auto p3 = pattern(1 << 20, 3);
  ASSERT_TRUE(t.write(f, 4096, p3).has_value());  // job B: [stripe, 5 stripes), after A2
  auto fsyncing = std::async(std::launch::async, [&] { return t.fs->fsync(f, false); });  // C
  const uint64_t at = 300 * 1024;
  std::this_thread::sleep_until(start + milliseconds(1250));       // C done (~1000), B not (~1500)
  for (auto& m : t.array.faulty) m->set_latency(milliseconds(0));  // reads answer at once
  auto seen = t.read(f, at, 4096);
  const int stale = !std::equal(seen.begin(), seen.end(), p3.begin() + (at - 4096));
  EXPECT_EQ(stale, 0) << "reads of acknowledged data returned older data";
  ASSERT_TRUE(fsyncing.get().has_value());
  for (auto& m : t.array.faulty) m->set_latency(milliseconds(0));
}
}  // namespace
}  // namespace stripefs::test

#include <unistd.h>

#include <filesystem>

#include "raid/file_member.hpp"
#include "raid/io_engine.hpp"
namespace stripefs::test {
namespace {
// fallocate takes whatever run reserve() returns: an extent longer than kMaxExtentLength,
// which decode_inode refuses after a remount.
TEST(FsFaultInjection, FallocateMakesAnOverlongExtent) {
  char templ[] = "/var/tmp/stripefs-fallocate-XXXXXX";
  ASSERT_NE(mkdtemp(templ), nullptr);
  const std::string dir = templ;
  struct Cleanup {
    std::string dir;
    ~Cleanup() { std::filesystem::remove_all(dir); }
  } cleanup{dir};
  auto engine = IoEngine::create();
  ASSERT_TRUE(engine.has_value());
  std::vector<std::unique_ptr<FileMember>> files;
  std::vector<Member*> members;
  for (int i = 0; i < 4; ++i) {
    const std::string path = dir + "/m" + std::to_string(i);
    int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_RDWR, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, 3ll << 30), 0);
    ::close(fd);
    auto m = FileMember::open(path, **engine);
    ASSERT_TRUE(m.has_value()) << m.error().message;
    members.push_back(m->get());
    files.push_back(std::move(*m));
  }
  auto g = Geometry::create(RaidLevel::raid5, 4, 64 * 1024, members[0]->size());
  ASSERT_TRUE(g.has_value());
  auto v = Volume::create(*g, members, 0);
  ASSERT_TRUE(v.has_value());
  ASSERT_TRUE(fs::make_filesystem(**v, {}).has_value());
  {
    auto m = fs::Filesystem::mount(**v, {});
    ASSERT_TRUE(m.has_value());
    auto& fs = **m;
    auto f = fs.mknod(kRootInode, "big", S_IFREG | 0644, 0, {});
    ASSERT_TRUE(f.has_value());
    ASSERT_TRUE(fs.fallocate(f->ino, 0, 0, 5ull << 30).has_value());
    ASSERT_TRUE(fs.unmount().has_value());
  }
  auto m = fs::Filesystem::mount(**v, {});
  ASSERT_TRUE(m.has_value());
  auto a = (*m)->lookup(kRootInode, "big");
  EXPECT_TRUE(a.has_value()) << a.error().message;
  ASSERT_TRUE((*m)->unmount().has_value());
}
}  // namespace
}  // namespace stripefs::test

namespace stripefs::test {
namespace {

// Fills the filesystem until data writes fail, then takes the metadata reserve down too.
void fill_past_reserve(MemoryFs& t, uint64_t log, const std::vector<std::byte>& data) {
  ASSERT_TRUE(t.write(log, 0, data).has_value());
  const uint64_t fill = t.create(kRootInode, "fill");
  std::vector<std::byte> chunk(64 << 10, std::byte{7});
  for (uint64_t off = 0; t.write(fill, off, chunk); off += chunk.size()) {
  }
  ASSERT_TRUE(t.fs->sync().has_value());
  for (int i = 0; i < 2000; ++i) {  // directory blocks take no reserve check
    if (!t.fs->mknod(kRootInode, "d" + std::to_string(i), S_IFDIR | 0755, 0, t.root)) break;
  }
  ASSERT_TRUE(t.fs->sync().has_value());
}

// Without data checksums, overwriting blocks a file owns needs no space, however full the
// filesystem.
TEST(FsFaultInjection, OverwriteInPlaceOnFullFilesystem) {
  fs::MakeFsOptions no_checksums;
  no_checksums.checksums = false;
  MemoryFs t(16ull << 20, no_checksums);
  const uint64_t log = t.create(kRootInode, "log");
  fill_past_reserve(t, log, std::vector<std::byte>(1 << 20, std::byte{3}));
  auto w = t.write(log, 8192, std::vector<std::byte>(4096, std::byte{9}));
  EXPECT_TRUE(w.has_value()) << w.error().message;
}

// With them, an overwrite goes to new blocks (copy on write), so on a full filesystem it is
// refused at write() with ENOSPC, as on btrfs, and the file keeps what it held; once space
// is freed it goes through.
TEST(FsFaultInjection, OverwriteOnAFullFilesystemWithChecksumsIsEnospcAndLosesNothing) {
  MemoryFs t(16ull << 20);
  const uint64_t log = t.create(kRootInode, "log");
  const std::vector<std::byte> data(1 << 20, std::byte{3});
  fill_past_reserve(t, log, data);
  auto w = t.write(log, 8192, std::vector<std::byte>(4096, std::byte{9}));
  ASSERT_FALSE(w.has_value());
  EXPECT_EQ(w.error().code, ENOSPC);
  ASSERT_TRUE(t.fs->sync().has_value());
  EXPECT_TRUE(t.read(log, 0, data.size()) == data);
  ASSERT_TRUE(t.fs->unlink(kRootInode, "fill").has_value());
  w = t.write(log, 8192, std::vector<std::byte>(4096, std::byte{9}));
  ASSERT_TRUE(w.has_value()) << w.error().message;
  t.remount();
  auto back = t.read(log, 8192, 4096);
  EXPECT_TRUE(back == std::vector<std::byte>(4096, std::byte{9}));
}

// A truncate on a full filesystem never commits half done (the old size with a freed tail).
TEST(FsFaultInjection, TruncateOnFullFilesystemCommitsWhole) {
  MemoryFs t(16ull << 20);
  const uint64_t log = t.create(kRootInode, "log");
  auto data = pattern(1 << 20, 1);
  fill_past_reserve(t, log, data);
  fs::SetAttr c;
  c.size = 5000;
  ASSERT_TRUE(t.fs->setattr(log, c).has_value());
  t.crash_and_mount();
  auto a = t.fs->getattr(log);
  ASSERT_TRUE(a.has_value());
  if (a->size != 5000) {
    EXPECT_TRUE(t.read(log, 0, data.size()) == data);
  } else {
    EXPECT_EQ(t.read(log, 0, 5000), std::vector<std::byte>(data.begin(), data.begin() + 5000));
  }
}

TEST(DataBuffers, CapacityIsCloseToTheRequest) {
  auto pool = fs::DataBuffers::create(64 << 20);
  std::byte* first = nullptr;
  {
    auto a = pool->get(33 * 4096);
    first = a->data();
  }
  EXPECT_NE(pool->get(256 * 1024)->data(), first);  // a 192 KiB allocation is not reused
  auto b = pool->get(33 * 4096);
  EXPECT_EQ(b->data(), first);  // but a request of the same capacity reuses it
  EXPECT_EQ(b->size(), 33u * 4096);
  // Below 64 KiB capacities go by 4 KiB, and are reused too (a 4 KiB read takes one).
  std::byte* small = nullptr;
  {
    auto c = pool->get(4096);
    small = c->data();
    EXPECT_EQ(c->size(), 4096u);
  }
  EXPECT_NE(pool->get(8192)->data(), small);
  EXPECT_EQ(pool->get(100)->data(), small);
}

// Small buffers go back to the cache of the thread that drops them, and are reused by that
// thread first; past the cache's bound they go to the shared pool, where any thread finds them.
TEST(DataBuffers, SmallBuffersAreCachedPerThreadThenShared) {
  auto pool = fs::DataBuffers::create(64 << 20);
  auto on_thread = [](auto f) { std::thread(f).join(); };
  std::shared_ptr<AlignedBuffer> from_main = pool->get(4096);
  std::byte* const moved = from_main->data();
  std::byte* reused_on_dropper = nullptr;
  on_thread([&] {
    from_main.reset();  // dropped here: this thread's cache
    reused_on_dropper = pool->get(4096)->data();
  });
  EXPECT_EQ(reused_on_dropper, moved);

  const size_t per_thread = fs::DataBuffers::kThreadCacheBytes / 4096;
  std::set<std::byte*> dropped;
  std::promise<void> dropped_all, done;
  // The dropping thread stays alive, so that what its cache holds is not freed (and its
  // addresses not handed out again) while the other thread asks.
  std::thread dropper([&, finished = done.get_future()] {
    {
      std::vector<std::shared_ptr<AlignedBuffer>> held;
      for (size_t i = 0; i < per_thread + 2; ++i) {
        held.push_back(pool->get(4096));
        dropped.insert(held.back()->data());
      }
    }  // per_thread of them stay in this thread's cache, 2 go to the pool
    dropped_all.set_value();
    finished.wait();
  });
  dropped_all.get_future().wait();
  std::vector<std::byte*> got;
  on_thread([&] {
    std::vector<std::shared_ptr<AlignedBuffer>> held;
    for (int i = 0; i < 3; ++i) {
      held.push_back(pool->get(4096));
      got.push_back(held.back()->data());
    }
  });
  EXPECT_TRUE(dropped.count(got[0]) && dropped.count(got[1])) << "the overflow was not pooled";
  EXPECT_FALSE(dropped.count(got[2])) << "more came back than overflowed the thread cache";
  done.set_value();
  dropper.join();
}

}  // namespace
}  // namespace stripefs::test

namespace stripefs::test {
namespace {

// Blocks freed under a read still in flight stay unused until that read is done, even once
// a checkpoint covers the free: the read would otherwise return another file's data. A
// writer that needs them waits for the read (a second at most) rather than failing.
TEST(FsFaultInjection, FreesWaitForReadsInFlight) {
  MemoryFs t(8ull << 20);
  const uint64_t free_blocks = t.fs->statfs().blocks_free;
  const size_t size = (free_blocks - 256) * 4096;  // all but a MiB
  const auto old_data = pattern(size, 41);
  uint64_t a = t.create(kRootInode, "a");
  ASSERT_TRUE(t.write(a, 0, old_data).has_value());
  t.remount();  // nothing of "a" left in the cache: reads go to the members
  auto found = t.fs->lookup(kRootInode, "a");
  ASSERT_TRUE(found.has_value());
  a = found->ino;

  // Find where the first block lives (one member read), then hold reads there.
  for (auto& f : t.array.faulty) f->set_logging(true);
  EXPECT_EQ(t.read(a, 0, 4096), std::vector<std::byte>(old_data.begin(), old_data.begin() + 4096));
  FaultyMember* holder = nullptr;
  uint64_t at = 0;
  for (auto& f : t.array.faulty) {
    f->set_logging(false);
    for (const LoggedIo& io : f->take_log()) {
      if (io.op == MemberOp::read && io.length == 4096) holder = f.get(), at = io.offset;
    }
  }
  ASSERT_NE(holder, nullptr);
  holder->hold(MemberOp::read, {at, at + 4096});
  std::promise<Result<fs::ReadReply>> replied;
  t.fs->read(a, 0, 4096, [&](Result<fs::ReadReply> r) { replied.set_value(std::move(r)); });
  ASSERT_EQ(holder->held(), 1u);

  ASSERT_TRUE(t.fs->unlink(kRootInode, "a").has_value());
  ASSERT_TRUE(t.fs->sync().has_value());
  const uint64_t b = t.create(kRootInode, "b");
  const auto new_data = pattern(size, 42);
  auto w = t.write(b, 0, new_data);  // needs the blocks the held read still uses
  ASSERT_FALSE(w.has_value()) << "blocks under a read in flight were handed out again";
  EXPECT_EQ(w.error().code, ENOSPC);

  // Released while the writer waits: the write then gets the space.
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    holder->release_held();
  });
  w = t.write(b, 0, new_data);
  release.join();
  EXPECT_TRUE(w.has_value()) << w.error().message;
  auto r = replied.get_future().get();
  ASSERT_TRUE(r.has_value()) << r.error().message;
  ASSERT_EQ(r->fragments.size(), 1u);
  EXPECT_TRUE(std::equal(r->fragments[0].begin(), r->fragments[0].end(), old_data.begin()))
      << "the read in flight returned data written after it";
  ASSERT_TRUE(t.fs->sync().has_value());
  EXPECT_EQ(t.read(b, size - 4096, 4096),
            std::vector<std::byte>(new_data.end() - 4096, new_data.end()));
}

}  // namespace
}  // namespace stripefs::test

namespace stripefs::test {
namespace {

// Directories, symlinks and attributes made while the filesystem is full of dirty data
// never take the blocks promised to that data: they get ENOSPC, and the data's writeback
// still finds its space. Found by tests/check 026 (eight processes racing on a tree until
// RAID1 filled up): "writeback found no space for reserved data", then read-only.
TEST(FsFaultInjection, MetadataNeverTakesTheSpacePromisedToDirtyData) {
  MemoryFs t(16ull << 20);
  const uint64_t f = t.create(kRootInode, "fill");
  auto chunk = pattern(256 << 10, 3);
  uint64_t written = 0;
  for (;;) {
    auto r = t.write(f, written, chunk);
    if (!r) break;
    written += *r;
    ASSERT_LT(written, 64ull << 20);
  }
  int refused = 0;
  for (int i = 0; i < 300; ++i) {
    const std::string name = "d" + std::to_string(i);
    const uint64_t inodes_free = t.fs->statfs().files_free;
    auto d = t.fs->mknod(kRootInode, name, S_IFDIR | 0755, 0, t.root);
    if (d) {
      auto inner = t.fs->mknod(d->ino, "x", S_IFREG | 0644, 0, t.root);
      if (!inner) {
        EXPECT_EQ(inner.error().code, ENOSPC);
      }
    } else {
      EXPECT_EQ(d.error().code, ENOSPC) << d.error().message;
      EXPECT_EQ(t.fs->statfs().files_free, inodes_free) << "a refused mkdir kept its inode";
    }
    auto s = t.fs->symlink(kRootInode, "s" + std::to_string(i), std::string(3000, 'x'), t.root);
    if (!s) {
      EXPECT_EQ(s.error().code, ENOSPC) << s.error().message;
      ++refused;
    }
    auto x = t.fs->setxattr(f, "user.a" + std::to_string(i), "v", 0);
    if (!x) {
      EXPECT_EQ(x.error().code, ENOSPC) << x.error().message;
    }
  }
  EXPECT_GT(refused, 0) << "the filesystem never filled up";
  ASSERT_TRUE(t.fs->fsync(f, false).has_value()) << "the promised data found no space";
  EXPECT_EQ(t.read(f, written - 100, 100), std::vector<std::byte>(chunk.end() - 100, chunk.end()));
  // Still writable: no error turned it read-only.
  t.fs->forget(f, 1);
  ASSERT_TRUE(t.fs->unlink(kRootInode, "fill").has_value());
  const uint64_t g = t.create(kRootInode, "after");
  ASSERT_TRUE(t.write(g, 0, chunk).has_value());
  ASSERT_TRUE(t.fs->fsync(g, false).has_value());
}

}  // namespace
}  // namespace stripefs::test
