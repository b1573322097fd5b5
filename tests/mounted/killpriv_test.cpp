// Set-id bits and file capabilities that a change takes away (fs/daemon/killpriv_v2.hpp,
// Filesystem::kill_privs), with killpriv v2 (the daemon does it) and v1 (the kernel does
// most of it): the two must give what a local filesystem gives. And what v2 saves: without
// it the kernel asks the daemon for a file's security.capability before every write.
//
// The kernel still removes capabilities itself whenever it looks for them (a file's first
// write, truncate or chown after they were set), so these tests cannot tell the daemon's
// removal from the kernel's; the core's is tested in tests/unit/fs/core/kill_privs_test.cpp.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "mounted/array_check.hpp"
#include "mounted/child_checks.hpp"
#include "mounted/mounted_fixture.hpp"

namespace stripefs::test {
namespace {

constexpr gid_t kOtherGroup = 3000;  // neither root's nor nobody's

// File capabilities as setcap(8) writes them (struct vfs_cap_data, revision 2): CAP_NET_RAW
// permitted.
std::string file_caps() {
  const uint32_t words[5] = {0x02000000u, 1u << 13, 0, 0, 0};
  return std::string(reinterpret_cast<const char*>(words), sizeof(words));
}

class Killpriv : public MountedTest {
 protected:
  std::string mount_options() const override { return "default_permissions,allow_other"; }
  virtual bool v2() const { return true; }

  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "dropping to another user needs root";
    MountedTest::SetUp();
    if (fs_.is_target()) GTEST_SKIP() << "the stripefs daemon's own behaviour and counters";
    EXPECT_EQ(fuse_stats()["killpriv_v2"], v2());
  }

  nlohmann::json fuse_stats() {
    auto stats = daemon_query(fs_.root().string(), "stats");
    EXPECT_TRUE(stats) << stats.error();
    return stats ? (*stats)["fuse"] : nlohmann::json();
  }

  void make_file(const std::string& name, mode_t mode, uid_t uid = 0, gid_t gid = 0) {
    ASSERT_TRUE(write_file(path(name), to_bytes("data")));
    ASSERT_SYS(chown(path(name).c_str(), uid, gid));
    ASSERT_SYS(chmod(path(name).c_str(), mode));
  }
  mode_t mode_of(const std::string& name) { return stat_of(path(name)).st_mode & 07777; }
  bool has_caps(const std::string& name) {
    char value[64];
    return getxattr(path(name).c_str(), "security.capability", value, sizeof(value)) >= 0;
  }

  // Capability queries made while a file is written `writes` times, 4 KiB each, by root.
  uint64_t queries_for_writes(int writes) {
    const uint64_t before = fuse_stats()["capability_queries"].get<uint64_t>();
    const int fd = open(path("file").c_str(), O_CREAT | O_WRONLY, 0644);
    EXPECT_GE(fd, 0) << errno_name(errno);
    char block[4096] = {};
    for (int i = 0; i < writes; ++i) {
      EXPECT_EQ(pwrite(fd, block, sizeof(block), static_cast<off_t>(i) * 4096), 4096);
    }
    close(fd);
    return fuse_stats()["capability_queries"].get<uint64_t>() - before;
  }

  // As on a local filesystem (Linux 6.2 and later): a write (buffered or direct), truncate,
  // fallocate or copy into a file by someone without CAP_FSETID (nobody; root without it)
  // clears set-user-ID, and set-group-ID with group execute or when the writer is not in
  // the file's group; root keeps them; a chown clears set-user-ID and set-group-ID with
  // group execute (and without it, for a caller outside the file's group who lacks
  // CAP_FSETID); every write, truncate and chown removes the file's capabilities. All of it
  // survives a remount.
  void check_changes_take_privs_away() {
    for (const char* name : {"write", "direct", "truncate", "fallocate", "copy", "root",
                             "root-nofsetid", "root-nofsetid-truncate", "chown"}) {
      ASSERT_NO_FATAL_FAILURE(make_file(name, 06777));
    }
    ASSERT_NO_FATAL_FAILURE(make_file("sgid-other-group", 02666, 0, kOtherGroup));
    ASSERT_NO_FATAL_FAILURE(make_file("sgid-own-group", 02666, 0, kNogroup));
    ASSERT_NO_FATAL_FAILURE(make_file("chgrp-by-nobody", 02644, kNobody, kOtherGroup));
    ASSERT_NO_FATAL_FAILURE(make_file("chown-sgid-noexec", 02644));
    ASSERT_NO_FATAL_FAILURE(make_file("source", 0644));
    const std::string caps = file_caps();
    for (const char* name : {"cap-write", "cap-truncate", "cap-chown"}) {
      ASSERT_NO_FATAL_FAILURE(make_file(name, 0755));
      ASSERT_SYS(setxattr(path(name).c_str(), "security.capability", caps.data(), caps.size(), 0));
    }
    auto write_one = [](ChildChecks& c, const std::string& file) {
      const int fd = open(file.c_str(), O_WRONLY);
      CHILD_OK(c, fd);
      CHILD_OK(c, pwrite(fd, "x", 1, 0));
      close(fd);
    };
    run_in_child(path(), become_nobody, [&](ChildChecks& c) {
      write_one(c, path("write"));
      write_one(c, path("sgid-other-group"));
      write_one(c, path("sgid-own-group"));
      void* block = nullptr;
      CHILD_OK(c, posix_memalign(&block, 4096, 4096) == 0 ? 0 : -1);
      std::memset(block, 'd', 4096);
      int fd = open(path("direct").c_str(), O_WRONLY | O_DIRECT);
      CHILD_OK(c, fd);
      CHILD_OK(c, pwrite(fd, block, 4096, 0));
      close(fd);
      std::free(block);
      CHILD_OK(c, truncate(path("truncate").c_str(), 1));
      fd = open(path("fallocate").c_str(), O_WRONLY);
      CHILD_OK(c, fd);
      CHILD_OK(c, fallocate(fd, 0, 0, 8192));
      close(fd);
      const int in = open(path("source").c_str(), O_RDONLY);
      const int out = open(path("copy").c_str(), O_WRONLY);
      CHILD_OK(c, copy_file_range(in, nullptr, out, nullptr, 4, 0));
      close(in);
      close(out);
      CHILD_OK(c, chown(path("chgrp-by-nobody").c_str(), -1, kNogroup));
    });
    run_in_child(path(), become_root_without_fsetid, [&](ChildChecks& c) {
      write_one(c, path("root-nofsetid"));
      CHILD_OK(c, truncate(path("root-nofsetid-truncate").c_str(), 1));
    });
    const int fd = open(path("root").c_str(), O_WRONLY);
    ASSERT_SYS(fd);
    ASSERT_SYS(pwrite(fd, "x", 1, 0));
    close(fd);
    ASSERT_SYS(chown(path("chown").c_str(), kNobody, kNogroup));
    ASSERT_SYS(chown(path("chown-sgid-noexec").c_str(), kNobody, kNogroup));
    const int cap_fd = open(path("cap-write").c_str(), O_WRONLY);  // not O_TRUNC: a write
    ASSERT_SYS(cap_fd);
    ASSERT_SYS(pwrite(cap_fd, "x", 1, 0));
    close(cap_fd);
    ASSERT_SYS(truncate(path("cap-truncate").c_str(), 1));
    ASSERT_SYS(chown(path("cap-chown").c_str(), kNobody, kNogroup));
    for (int round = 0; round < 2; ++round) {
      const char* when = round == 0 ? "mounted" : "after a remount";
      for (const char* name : {"write", "direct", "truncate", "fallocate", "copy", "root-nofsetid",
                               "root-nofsetid-truncate", "chown"}) {
        EXPECT_EQ(mode_of(name), 0777u) << name << ", " << when;
      }
      EXPECT_EQ(mode_of("root"), 06777u) << "root's write, " << when;
      EXPECT_EQ(mode_of("sgid-other-group"), 0666u) << when;
      EXPECT_EQ(mode_of("sgid-own-group"), 02666u) << when;
      EXPECT_EQ(mode_of("chgrp-by-nobody"), 0644u) << when;
      EXPECT_EQ(mode_of("chown-sgid-noexec"), 02644u) << "root's chown, " << when;
      for (const char* name : {"cap-write", "cap-truncate", "cap-chown"}) {
        EXPECT_FALSE(has_caps(name)) << name << ", " << when;
        EXPECT_EQ(mode_of(name), 0755u) << name << ", " << when;
      }
      if (round == 0 && fs_.can_remount()) {
        const Status done = fs_.remount();
        ASSERT_TRUE(done) << done.error();
      }
    }
  }
};

TEST_F(Killpriv, ChangesTakeSetIdBitsAndCapabilitiesAway) {
  check_changes_take_privs_away();
}

TEST_F(Killpriv, WritesDoNotEachAskForTheFilesCapabilities) {
  EXPECT_LE(queries_for_writes(64), 2u);
}

class KillprivV1 : public Killpriv {
 protected:
  std::string mount_options() const override {
    return "default_permissions,allow_other,killpriv=v1";
  }
  bool v2() const override { return false; }
};

TEST_F(KillprivV1, ChangesTakeSetIdBitsAndCapabilitiesAway) {
  check_changes_take_privs_away();
}

TEST_F(KillprivV1, TheKernelAsksBeforeEveryWrite) {
  EXPECT_GE(queries_for_writes(64), 64u);
}

}  // namespace
}  // namespace stripefs::test
