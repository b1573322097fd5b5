// What the array sees of the filesystem's writes: streaming writes take the full-stripe path
// without reading anything back, and parity stays consistent while a mapped region and
// write() race over one file (stable pages). These need the daemon and its array.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "mounted/array_check.hpp"
#include "mounted/mounted_fixture.hpp"

namespace stripefs::test {
namespace {

uint64_t counter(const nlohmann::json& stats, const char* section, const char* name) {
  return stats[section][name].get<uint64_t>();
}

class StripePath : public MountedTest {
 protected:
  // Metadata commits and timed writeback wait, so the data phase is data only; and the cache
  // holds the whole stream, so that members slower than the writer (a busy disk under
  // /var/tmp) never make the cache's back-pressure write back a stripe's first part alone.
  std::string mount_options() const override {
    return "commit_interval=3600,writeback_delay=3600,cache_size=2G";
  }
  uint64_t member_size() const override { return 640 * kMiB; }
};

TEST_F(StripePath, StreamingOneGibibyteIsFullStripesWithoutReads) {
  if (!fs_.can_remount()) GTEST_SKIP() << "needs the stripefs daemon";
  auto before = daemon_query(fs_.root().string(), "stats");
  ASSERT_TRUE(before) << before.error();
  Fd fd = open_file(path("stream"), O_WRONLY | O_CREAT | O_TRUNC);
  ASSERT_TRUE(fd.valid());
  const Bytes chunk = random_bytes(kMiB, 11);
  for (uint64_t at = 0; at < kGiB; at += kMiB) {
    ASSERT_EQ(pwrite(fd.get(), chunk.data(), chunk.size(), static_cast<off_t>(at)),
              static_cast<ssize_t>(kMiB));
  }
  // Every whole stripe goes out as soon as it is dirty; wait for them to land.
  nlohmann::json during;
  for (int i = 0; i < 1800; ++i) {
    auto now = daemon_query(fs_.root().string(), "stats");
    ASSERT_TRUE(now) << now.error();
    during = *now;
    if (counter(during, "filesystem", "writeback_done_bytes") >= kGiB - kMiB) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const uint64_t full = counter(during, "volume", "full_stripe_bytes") -
                        counter(*before, "volume", "full_stripe_bytes");
  const uint64_t prereads =
      counter(during, "volume", "prereads") - counter(*before, "volume", "prereads");
  const uint64_t rmw =
      counter(during, "volume", "rmw_writes") - counter(*before, "volume", "rmw_writes");
  EXPECT_GE(full, kGiB * 95 / 100) << "bytes through the full-stripe path";
  EXPECT_EQ(prereads, 0u) << "member reads for partial-stripe writes";
  EXPECT_EQ(rmw, 0u) << "read-modify-write stripe writes";
  EXPECT_EQ(counter(during, "filesystem", "bytes_copied_in") -
                counter(*before, "filesystem", "bytes_copied_in"),
            kGiB)
      << "each byte copied once";
  ASSERT_EQ(fsync(fd.get()), 0);
  ASSERT_EQ(fd.close(), 0);
  const Bytes back = read_file(path("stream"));
  ASSERT_EQ(back.size(), kGiB);
  for (uint64_t at = 0; at < kGiB; at += kMiB) {
    ASSERT_EQ(std::memcmp(back.data() + at, chunk.data(), kMiB), 0) << "at " << at;
  }
}

// One thread keeps rewriting a mapped region while another write()s the rest of the same
// file; the kernel hands the daemon pages that are still changing. Parity must match the
// data on every stripe, and every block must hold one whole version of what was written.
TEST_F(StripePath, MappedAndWrittenPagesKeepParityConsistent) {
  if (!fs_.can_remount()) GTEST_SKIP() << "needs the stripefs daemon and its members";
  constexpr size_t kRegion = 8 * kMiB;
  constexpr size_t kBlock = 4096;
  Fd fd = open_file(path("racy"), O_RDWR | O_CREAT | O_TRUNC);
  ASSERT_TRUE(fd.valid());
  ASSERT_EQ(ftruncate(fd.get(), 2 * kRegion), 0);
  void* map = mmap(nullptr, kRegion, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  ASSERT_NE(map, MAP_FAILED);
  auto* mapped = static_cast<uint8_t*>(map);
  // A block's version: 16-byte records (writer, version, block) filling all 4096 bytes.
  auto fill = [](uint8_t* block, uint32_t writer, uint32_t version, uint64_t index) {
    uint8_t record[16];
    std::memcpy(record, &writer, 4);
    std::memcpy(record + 4, &version, 4);
    std::memcpy(record + 8, &index, 8);
    for (size_t i = 0; i < kBlock; i += 16) std::memcpy(block + i, record, 16);
  };
  std::atomic<bool> stop{false};
  std::thread mapper([&] {
    for (uint32_t version = 1; !stop.load(); ++version) {
      for (size_t b = 0; b < kRegion / kBlock; ++b) fill(mapped + b * kBlock, 1, version, b);
      msync(map, kRegion, MS_ASYNC);
    }
  });
  std::thread writer([&] {
    std::vector<uint8_t> block(kBlock);
    for (uint32_t version = 1; !stop.load(); ++version) {
      for (size_t b = kRegion / kBlock; b < 2 * kRegion / kBlock; ++b) {
        fill(block.data(), 2, version, b);
        if (pwrite(fd.get(), block.data(), kBlock, static_cast<off_t>(b * kBlock)) != kBlock)
          return;
      }
      fdatasync(fd.get());
    }
  });
  std::this_thread::sleep_for(std::chrono::seconds(4));
  stop = true;
  mapper.join();
  writer.join();
  ASSERT_EQ(msync(map, kRegion, MS_SYNC), 0);
  ASSERT_EQ(munmap(map, kRegion), 0);
  ASSERT_EQ(fsync(fd.get()), 0);
  ASSERT_EQ(fd.close(), 0);
  const Status unmounted = fs_.unmount();
  ASSERT_TRUE(unmounted) << unmounted.error();

  auto bad = inconsistent_stripes(fs_.members());
  ASSERT_TRUE(bad) << bad.error();
  EXPECT_EQ(*bad, 0u) << "stripes whose parity does not match their data";

  const Status mounted = fs_.mount();
  ASSERT_TRUE(mounted) << mounted.error();
  const Bytes data = read_file(path("racy"));
  ASSERT_EQ(data.size(), 2 * kRegion);
  for (size_t b = 0; b < data.size() / kBlock; ++b) {
    const uint8_t* block = data.data() + b * kBlock;
    uint32_t writer_id;
    uint64_t index;
    std::memcpy(&writer_id, block, 4);
    std::memcpy(&index, block + 8, 8);
    ASSERT_EQ(writer_id, b < kRegion / kBlock ? 1u : 2u) << "block " << b;
    ASSERT_EQ(index, b) << "block " << b;
    for (size_t i = 16; i < kBlock; i += 16) {
      ASSERT_EQ(std::memcmp(block, block + i, 16), 0) << "block " << b << " mixes versions";
    }
  }
}

// A RAID5 made with mkfs's defaults closes the write hole with a journal mirrored on its
// first members: small writes are logged there. After a crash (SIGKILL) with the first
// copy wiped, the mount reads the second, copies it back over the first, and parity is
// consistent afterwards.
TEST_F(StripePath, SmallWritesAreLoggedOnTheMembersByDefault) {
  if (!fs_.can_remount()) GTEST_SKIP() << "needs the stripefs daemon and its members";
  auto status = daemon_query(fs_.root().string(), "status");
  ASSERT_TRUE(status) << status.error();
  EXPECT_EQ((*status)["array"]["write_hole_journal"], "members");
  const Bytes base = random_bytes(4 * kMiB, 21);
  Fd fd = open_file(path("small"), O_RDWR | O_CREAT | O_TRUNC);
  ASSERT_TRUE(fd.valid());
  ASSERT_TRUE(write_at(fd.get(), base, 0));
  ASSERT_EQ(fsync(fd.get()), 0);  // the small writes below rewrite part of it
  auto before = daemon_query(fs_.root().string(), "stats");
  ASSERT_TRUE(before) << before.error();
  Bytes expect = base;
  for (int i = 0; i < 16; ++i) {  // 4 KiB writes, each a partial stripe
    const Bytes block = random_bytes(4096, 100 + static_cast<uint64_t>(i));
    const uint64_t at = static_cast<uint64_t>(i) * 260 * 1024;
    ASSERT_TRUE(write_at(fd.get(), block, static_cast<off_t>(at)));
    std::memcpy(expect.data() + at, block.data(), block.size());
  }
  ASSERT_EQ(fsync(fd.get()), 0);
  auto after = daemon_query(fs_.root().string(), "stats");
  ASSERT_TRUE(after) << after.error();
  // With data checksums the 16 blocks are written back to new blocks (copy on write), next
  // to each other: fewer stripes than the three they came from, but still partial ones.
  EXPECT_GE(counter(*after, "write_hole_journal", "stripes_logged") -
                counter(*before, "write_hole_journal", "stripes_logged"),
            1u)
      << "the partial-stripe writes logged first";
  fd.reset();
  const Status killed = fs_.kill9();
  ASSERT_TRUE(killed) << killed.error();
  auto area = member_journal_area(fs_.members()[0]);
  ASSERT_TRUE(area) << area.error();
  ASSERT_GT(area->second, 0u) << "the journal is on the members";
  auto copy_of = [&](size_t member) {
    std::ifstream in(fs_.members()[member], std::ios::binary);
    Bytes bytes(area->second);
    in.seekg(static_cast<std::streamoff>(area->first));
    in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    return bytes;
  };
  {
    std::fstream out(fs_.members()[0], std::ios::binary | std::ios::in | std::ios::out);
    const Bytes zeros(area->second, 0);
    out.seekp(static_cast<std::streamoff>(area->first));
    out.write(reinterpret_cast<const char*>(zeros.data()),
              static_cast<std::streamsize>(zeros.size()));
    ASSERT_TRUE(out.good());
  }
  const Status mounted = fs_.mount();
  ASSERT_TRUE(mounted) << mounted.error();
  EXPECT_EQ(read_file(path("small")), expect);
  const Status unmounted = fs_.unmount();
  ASSERT_TRUE(unmounted) << unmounted.error();
  EXPECT_TRUE(copy_of(0) == copy_of(1)) << "the wiped copy was restored from the other";
  auto bad = inconsistent_stripes(fs_.members());
  ASSERT_TRUE(bad) << bad.error();
  EXPECT_EQ(*bad, 0u) << "stripes whose parity does not match their data";
}

class StripePathUnlogged : public StripePath {
 protected:
  std::string mount_options() const override { return "write_hole=open,writeback_delay=3600"; }
};

// write_hole=open: the array keeps its journal, but this mount writes partial stripes in
// place without logging them, and says so.
TEST_F(StripePathUnlogged, WriteHoleOpenLogsNothing) {
  if (!fs_.can_remount()) GTEST_SKIP() << "needs the stripefs daemon";
  auto status = daemon_query(fs_.root().string(), "status");
  ASSERT_TRUE(status) << status.error();
  EXPECT_EQ((*status)["array"]["write_hole_journal"], "members");
  EXPECT_EQ((*status)["array"]["write_hole_logging"], false);
  Fd fd = open_file(path("small"), O_RDWR | O_CREAT | O_TRUNC);
  ASSERT_TRUE(fd.valid());
  ASSERT_TRUE(write_at(fd.get(), random_bytes(kMiB, 31), 0));
  ASSERT_EQ(fsync(fd.get()), 0);
  ASSERT_TRUE(write_at(fd.get(), random_bytes(4096, 32), 8192));
  ASSERT_EQ(fsync(fd.get()), 0);
  auto stats = daemon_query(fs_.root().string(), "stats");
  ASSERT_TRUE(stats) << stats.error();
  EXPECT_GT(counter(*stats, "volume", "partial_stripe_writes"), 0u);
  EXPECT_EQ(counter(*stats, "write_hole_journal", "stripes_logged"), 0u);
}

}  // namespace
}  // namespace stripefs::test
