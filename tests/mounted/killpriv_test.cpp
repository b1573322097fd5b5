// What killpriv v2 saves (fs/daemon/killpriv_v2.hpp): without it the kernel asks the daemon for
// a file's security.capability attribute before every write, a round trip each; with it,
// about once per file. The rules themselves are checked in both modes by
// Permissions*.ChangesTakeSetIdBitsAndCapabilitiesAway.
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>

#include "mounted/array_check.hpp"
#include "mounted/mounted_fixture.hpp"

namespace stripefs::test {
namespace {

constexpr int kWrites = 64;

class Killpriv : public MountedTest {
 protected:
  void SetUp() override {
    MountedTest::SetUp();
    if (fs_.is_target()) GTEST_SKIP() << "counts the stripefs daemon's requests";
  }

  // The daemon's fuse counters.
  nlohmann::json fuse_stats() {
    auto stats = daemon_query(fs_.root().string(), "stats");
    EXPECT_TRUE(stats) << stats.error();
    return stats ? (*stats)["fuse"] : nlohmann::json();
  }

  // Capability queries made while a file is written kWrites times, 4 KiB each, by root.
  uint64_t queries_for_writes() {
    const uint64_t before = fuse_stats()["capability_queries"].get<uint64_t>();
    const int fd = open(path("file").c_str(), O_CREAT | O_WRONLY, 0644);
    EXPECT_GE(fd, 0) << errno_name(errno);
    char block[4096] = {};
    for (int i = 0; i < kWrites; ++i) {
      EXPECT_EQ(pwrite(fd, block, sizeof(block), static_cast<off_t>(i) * 4096), 4096);
    }
    close(fd);
    return fuse_stats()["capability_queries"].get<uint64_t>() - before;
  }
};

TEST_F(Killpriv, WritesDoNotEachAskForTheFilesCapabilities) {
  EXPECT_EQ(fuse_stats()["killpriv_v2"], true);
  EXPECT_LE(queries_for_writes(), 2u);
}

class KillprivV1 : public Killpriv {
 protected:
  std::string mount_options() const override { return "killpriv=v1"; }
};

TEST_F(KillprivV1, TheKernelAsksBeforeEveryWrite) {
  EXPECT_EQ(fuse_stats()["killpriv_v2"], false);
  EXPECT_GE(queries_for_writes(), static_cast<uint64_t>(kWrites));
}

}  // namespace
}  // namespace stripefs::test
