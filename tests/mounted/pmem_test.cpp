// The pmem backend through the daemon: members made and mounted with --backend pmem and
// -o backend=pmem are driven by libpmem2 (raid/pmem_member.hpp) over ordinary files, which it
// maps through the page cache. An fsync reaches the members as persists; the file survives
// a crash of the daemon (the page cache outlives it either way: power loss is the unit
// tests' and the power-cut suite's business) and reads back the same through either
// backend, so both see one format; bad backends are refused by name with nothing written.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "mounted/array_check.hpp"
#include "mounted/command.hpp"
#include "mounted/mounted_fixture.hpp"

namespace stripefs::test {
namespace {

// Every member's backend, from `status`; failures name the member.
::testing::AssertionResult members_driven_by(const MountedFs& fs, const std::string& backend) {
  auto status = daemon_query(fs.root().string(), "status");
  if (!status) return ::testing::AssertionFailure() << status.error();
  size_t seen = 0;
  for (const auto& m : (*status)["members"]) {
    if (m["role"].is_null()) continue;
    ++seen;
    if (m["backend"] != backend) {
      return ::testing::AssertionFailure()
             << m["path"] << " is driven by " << m["backend"] << ", not " << backend;
    }
  }
  if (seen != MountedFs::kMembers) {
    return ::testing::AssertionFailure() << seen << " members in status";
  }
  return ::testing::AssertionSuccess();
}

uint64_t pmem_persists(const MountedFs& fs) {
  auto stats = daemon_query(fs.root().string(), "stats");
  EXPECT_TRUE(stats) << stats.error();
  return stats ? (*stats)["io"]["pmem_persists"].get<uint64_t>() : 0;
}

class PmemBackend : public MountedTest {
 protected:
  std::string mount_options() const override { return "backend=pmem"; }
  void SetUp() override {
    fs_.set_mkfs_arguments({"--backend", "pmem"});
    MountedTest::SetUp();
  }
};

TEST_F(PmemBackend, FsyncedDataSurvivesACrashAndReadsTheSameThroughEitherBackend) {
  if (!fs_.can_remount()) GTEST_SKIP() << "needs the stripefs daemon";
  ASSERT_TRUE(members_driven_by(fs_, "pmem"));
  const Bytes data = random_bytes(6 * kMiB + 1234, 41);
  Fd fd = open_file(path("f"), O_WRONLY | O_CREAT | O_TRUNC);
  ASSERT_TRUE(fd.valid());
  ASSERT_TRUE(write_at(fd.get(), data, 0));
  const uint64_t before = pmem_persists(fs_);
  ASSERT_SYS(fsync(fd.get()));
  // The fsync reached the members as flushes (and the journal's FUA writes).
  EXPECT_GT(pmem_persists(fs_), before);
  ASSERT_EQ(fd.close(), 0);

  auto crashed = fs_.kill9();
  ASSERT_TRUE(crashed) << crashed.error();
  auto mounted = fs_.mount();
  ASSERT_TRUE(mounted) << mounted.error();
  ASSERT_TRUE(members_driven_by(fs_, "pmem"));
  EXPECT_TRUE(same_bytes(read_file(path("f")), data));

  // The same members through the block path: the bytes libpmem2 wrote are the array's.
  fs_.set_mount_options("backend=block");
  auto remounted = fs_.remount();
  ASSERT_TRUE(remounted) << remounted.error();
  ASSERT_TRUE(members_driven_by(fs_, "file"));
  EXPECT_TRUE(same_bytes(read_file(path("f")), data));
}

TEST_F(PmemBackend, WritesAreNotPersistedOneByOne) {
  if (!fs_.can_remount()) GTEST_SKIP() << "needs the stripefs daemon";
  auto status_before = daemon_query(fs_.root().string(), "status");
  ASSERT_TRUE(status_before) << status_before.error();
  const uint64_t persists_before = pmem_persists(fs_);
  // 32 MiB, then one fsync: dozens of member writes (no request is larger than 1 MiB).
  Fd fd = open_file(path("g"), O_WRONLY | O_CREAT | O_TRUNC);
  ASSERT_TRUE(fd.valid());
  ASSERT_TRUE(write_at(fd.get(), random_bytes(32 * kMiB, 42), 0));
  ASSERT_SYS(fsync(fd.get()));
  auto status_after = daemon_query(fs_.root().string(), "status");
  ASSERT_TRUE(status_after) << status_after.error();
  uint64_t member_writes = 0;
  for (size_t i = 0; i < (*status_after)["members"].size(); ++i) {
    member_writes += (*status_after)["members"][i]["writes"].get<uint64_t>() -
                     (*status_before)["members"][i]["writes"].get<uint64_t>();
  }
  const uint64_t persists = pmem_persists(fs_) - persists_before;
  // Persisted: each member's dirty ranges at the fsync's flushes, merged, and the journal's
  // FUA writes. Persisting every write would give at least one per member write.
  EXPECT_GE(member_writes, 32u);
  EXPECT_GT(persists, 0u);
  RecordProperty("persists", std::to_string(persists));
  RecordProperty("member_writes", std::to_string(member_writes));
  EXPECT_LT(persists * 2, member_writes)
      << persists << " persists for " << member_writes << " member writes";
}

// Bad backends: one line that names what is wrong, and nothing on the devices.
class PmemRefusals : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/var/tmp/stripefs-pmem-refusal-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    for (int i = 0; i < 3; ++i) {
      members_ += " " + dir_ + "/m" + std::to_string(i);
      std::ofstream(dir_ + "/m" + std::to_string(i)).close();
      std::filesystem::resize_file(dir_ + "/m" + std::to_string(i), 64 * kMiB);
    }
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // Whether every member file is still all zeros.
  bool untouched() const {
    for (int i = 0; i < 3; ++i) {
      const Bytes data = read_file(dir_ + "/m" + std::to_string(i));
      if (data.size() != 64 * kMiB || !all_zero(data)) return false;
    }
    return true;
  }
  std::string dir_;
  std::string members_;
};

TEST_F(PmemRefusals, MkfsRefusesAnUnknownBackendByName) {
  const Command c =
      run(std::string(STRIPEFS_MKFS_PATH) + " -q -l 5 -n 3 --backend dax" + members_ + " 2>&1");
  EXPECT_EQ(c.status, 1) << c.output;
  EXPECT_NE(c.output.find("--backend 'dax'"), std::string::npos) << c.output;
  EXPECT_EQ(c.output.find('\n'), c.output.size() - 1) << c.output;
  EXPECT_TRUE(untouched());
}

TEST_F(PmemRefusals, MountRefusesAnUnknownBackendByName) {
  ASSERT_EQ(run(std::string(STRIPEFS_MKFS_PATH) + " -q -l 5 -n 3" + members_).status, 0);
  const std::string mountpoint = dir_ + "/mnt";
  std::filesystem::create_directory(mountpoint);
  std::string source = members_.substr(1);
  std::replace(source.begin(), source.end(), ' ', ':');
  const Command c = run(std::string(STRIPEFS_MOUNT_PATH) + " -o backend=dax " + source + " " +
                        mountpoint + " 2>&1");
  EXPECT_NE(c.status, 0) << c.output;
  EXPECT_NE(c.output.find("backend=dax"), std::string::npos) << c.output;
  EXPECT_NE(run("mountpoint -q " + mountpoint).status, 0) << "mounted";
}

}  // namespace
}  // namespace stripefs::test
