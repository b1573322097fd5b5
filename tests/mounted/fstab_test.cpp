// The filesystem as mount(8) and /etc/fstab see it: `mount -t fuse.stripefs SOURCE DIR -o
// OPTIONS` runs mount.fuse3, which runs the stripefs daemon (found on PATH), and the daemon
// detaches once the mount is up. Bad options are refused in one line.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "mounted/array_check.hpp"
#include "mounted/command.hpp"
#include "mounted/loop_device.hpp"
#include "mounted/mounted_fixture.hpp"

namespace stripefs::test {
namespace {

namespace fsys = std::filesystem;

// The type and source mountinfo shows for `mountpoint` ({"", ""}: not mounted).
std::pair<std::string, std::string> mount_entry(const std::string& mountpoint) {
  std::ifstream info("/proc/self/mountinfo");
  std::string line;
  while (std::getline(info, line)) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, point, rest;
    fields >> id >> parent >> dev >> root >> point;
    if (point != mountpoint) continue;
    while (fields >> rest && rest != "-") {
    }
    std::string type, source;
    fields >> type >> source;
    return {type, source};
  }
  return {};
}

std::string fstype_of(const std::string& mountpoint) {
  return mount_entry(mountpoint).first;
}

class FstabMount : public ::testing::Test {
 protected:
  void SetUp() override {
    char name[] = "/var/tmp/stripefs-fstab-XXXXXX";
    ASSERT_NE(mkdtemp(name), nullptr);
    dir_ = name;
    mnt_ = dir_ + "/mnt";
    fsys::create_directory(mnt_);
    for (int i = 0; i < 4; ++i) {
      const std::string m = dir_ + "/m" + std::to_string(i);
      fsys::resize_file((std::ofstream(m), m), 256ull << 20);
      source_ += (i ? ":" : "") + m;
    }
    std::string mkfs = STRIPEFS_MKFS_PATH;
    if (const char* env = std::getenv("STRIPEFS_MKFS_PATH")) mkfs = env;
    std::string daemon = STRIPEFS_MOUNT_PATH;
    if (const char* env = std::getenv("STRIPEFS_MOUNT_PATH")) daemon = env;
    bin_dir_ = fsys::path(daemon).parent_path().string();
    const Command made =
        run(mkfs + " -q -l 5 -n 4 " + dir_ + "/m0 " + dir_ + "/m1 " + dir_ + "/m2 " + dir_ + "/m3");
    ASSERT_EQ(made.status, 0) << made.output;
  }
  void TearDown() override {
    if (!fstype_of(mnt_).empty()) run("umount -l '" + mnt_ + "'");
    wait_for_daemon_exit();
    fsys::remove_all(dir_);
  }
  // What `mount -t fuse.stripefs` and an fstab line run: mount.fuse3 with the type. (mount(8)
  // itself gives its helpers a fixed PATH, where the build tree's daemon is not.)
  Command mount(const std::string& options) {
    return run("PATH='" + bin_dir_ + "':\"$PATH\" mount.fuse3 '" + source_ + "' '" + mnt_ +
               "' -t stripefs -o '" + options + "'");
  }
  // The daemon holds a lock on every member until it has flushed and exited.
  bool wait_for_daemon_exit() { return wait_for_unlock(dir_ + "/m0"); }
  std::string dir_, mnt_, source_, bin_dir_;
};

TEST_F(FstabMount, MountTypeFuseStripefsMountsAndRemounts) {
  if (std::getenv("STRIPEFS_TEST_TARGET") != nullptr) GTEST_SKIP() << "needs the daemon";
  const Command mounted = mount("allow_other,writeback_delay=1");
  ASSERT_EQ(mounted.status, 0) << mounted.output;
  EXPECT_EQ(fstype_of(mnt_), "fuse.stripefs");
  { std::ofstream(mnt_ + "/hello") << "from fstab\n"; }
  const Command unmounted = run("umount '" + mnt_ + "'");
  ASSERT_EQ(unmounted.status, 0) << unmounted.output;
  ASSERT_TRUE(wait_for_daemon_exit()) << "the daemon did not exit after umount";
  const Command again = mount("ro");
  ASSERT_EQ(again.status, 0) << again.output;
  std::string line;
  std::getline(std::ifstream(mnt_ + "/hello"), line);
  EXPECT_EQ(line, "from fstab");
  // Read-only: the kernel refuses writes before they reach the daemon.
  EXPECT_FALSE(std::ofstream(mnt_ + "/new").good() && fsys::exists(mnt_ + "/new"));
}

// mount(8) and the scripts around it expect silence from a mount that succeeds; a user's
// fsname= and subtype= name the mount, as on every other FUSE filesystem.
TEST_F(FstabMount, ASuccessfulMountIsSilentAndTheUsersNamesWin) {
  if (std::getenv("STRIPEFS_TEST_TARGET") != nullptr) GTEST_SKIP() << "needs the daemon";
  const Command mounted = mount("allow_other");
  ASSERT_EQ(mounted.status, 0) << mounted.output;
  EXPECT_EQ(mounted.output, "") << "a successful mount printed something";
  EXPECT_EQ(mount_entry(mnt_), std::make_pair(std::string("fuse.stripefs"), dir_ + "/m0"));
  ASSERT_EQ(run("umount '" + mnt_ + "'").status, 0);
  const Command named = run("'" + bin_dir_ + "/stripefs' -o fsname=nas0,subtype=nas '" + source_ +
                            "' '" + mnt_ + "'");
  ASSERT_EQ(named.status, 0) << named.output;
  EXPECT_EQ(named.output, "");
  EXPECT_EQ(mount_entry(mnt_), std::make_pair(std::string("fuse.nas"), std::string("nas0")));
}

// umount returns once the kernel has let go of the mount, while the daemon is still writing
// back and closing the array: a mount of the same members at once (scripts, test suites,
// systemd) waits for it rather than failing with "in use". A mount of members that a
// mounted daemon holds is still refused at once.
TEST_F(FstabMount, UmountThenMountAtOnceWorksEveryTime) {
  if (std::getenv("STRIPEFS_TEST_TARGET") != nullptr) GTEST_SKIP() << "needs the daemon";
  const Bytes data = random_bytes(24u << 20, 5);
  for (int round = 0; round < 4; ++round) {
    const Command mounted = mount("allow_other");
    ASSERT_EQ(mounted.status, 0) << "round " << round << ": " << mounted.output;
    if (round > 0) {
      EXPECT_TRUE(same_bytes(read_file(mnt_ + "/f" + std::to_string(round - 1)), data));
    }
    {
      std::ofstream out(mnt_ + "/f" + std::to_string(round), std::ios::binary);
      out.write(reinterpret_cast<const char*>(data.data()),
                static_cast<std::streamsize>(data.size()));
    }
    if (round == 0) {
      const auto start = std::chrono::steady_clock::now();
      const Command twice = run("'" + bin_dir_ + "/stripefs' '" + source_ + "' '" + dir_ + "'");
      EXPECT_NE(twice.status, 0);
      EXPECT_NE(twice.output.find("in use by another stripefs process"), std::string::npos)
          << twice.output;
      EXPECT_NE(twice.output.find("mounted"), std::string::npos) << twice.output;
      EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10))
          << "a mounted holder was waited for";
    }
    const Command unmounted = run("umount '" + mnt_ + "'");
    ASSERT_EQ(unmounted.status, 0) << unmounted.output;
  }
}

// An array named by its UUID, its members found among the block devices: uuid= (what an
// fstab line uses, since mount(8) looks UUID= up with libblkid, which knows no stripefs
// members) and UUID= (by hand) both mount; a UUID that is no array's is one clear line.
TEST_F(FstabMount, AnArrayOnBlockDevicesIsMountedByItsUuid) {
  if (std::getenv("STRIPEFS_TEST_TARGET") != nullptr) GTEST_SKIP() << "needs the daemon";
  auto uuid = member_array_uuid(dir_ + "/m0");
  ASSERT_TRUE(uuid) << uuid.error();
  std::vector<LoopDevice> loops;
  for (int i = 0; i < 4; ++i) {
    auto loop = LoopDevice::attach(dir_ + "/m" + std::to_string(i));
    ASSERT_TRUE(loop) << loop.error();
    loops.push_back(std::move(*loop));
  }
  const std::string files = source_;
  for (const char* spelling : {"uuid=", "UUID="}) {
    source_ = spelling + *uuid;
    const Command mounted = mount("allow_other");
    ASSERT_EQ(mounted.status, 0) << spelling << ": " << mounted.output;
    EXPECT_EQ(mounted.output, "");
    const auto [type, device] = mount_entry(mnt_);
    EXPECT_EQ(type, "fuse.stripefs");
    EXPECT_TRUE(device.starts_with("/dev/loop")) << device;
    ASSERT_EQ(run("umount '" + mnt_ + "'").status, 0);
    ASSERT_TRUE(wait_for_unlock(loops[0].path().string()));
  }
  source_ = "uuid=00000000-1111-2222-3333-444444444444";
  const Command nobody = mount("allow_other");
  EXPECT_NE(nobody.status, 0);
  EXPECT_EQ(nobody.output,
            "stripefs: UUID=00000000-1111-2222-3333-444444444444: no block device holds a member "
            "of that array\n");
  source_ = files;
}

TEST_F(FstabMount, BadOptionsAndSourcesAreOneClearLine) {
  if (std::getenv("STRIPEFS_TEST_TARGET") != nullptr) GTEST_SKIP() << "needs the daemon";
  const Command bad_size = mount("cache_size=lots");
  EXPECT_NE(bad_size.status, 0);
  EXPECT_NE(bad_size.output.find("cache_size=lots: not a size of at least 16M"), std::string::npos)
      << bad_size.output;
  const Command bad_hole = mount("write_hole=maybe");
  EXPECT_NE(bad_hole.status, 0);
  EXPECT_NE(bad_hole.output.find("write_hole=maybe: not closed or open"), std::string::npos)
      << bad_hole.output;
  const Command bad_threads = mount("io_threads=0");
  EXPECT_NE(bad_threads.status, 0);
  EXPECT_NE(bad_threads.output.find("io_threads must be between 1 and 256"), std::string::npos)
      << bad_threads.output;
  for (const char* timing : {"writeback_delay=nan", "commit_interval=inf", "commit_interval=0"}) {
    const Command bad_timing = mount(timing);
    EXPECT_NE(bad_timing.status, 0);
    EXPECT_NE(bad_timing.output.find(std::string(timing) + ": not a positive number of seconds"),
              std::string::npos)
        << bad_timing.output;
  }
  source_ += ":" + dir_ + "/missing";
  const Command missing = mount("defaults");
  EXPECT_NE(missing.status, 0);
  EXPECT_NE(missing.output.find("missing: No such file or directory"), std::string::npos)
      << missing.output;
  EXPECT_TRUE(fstype_of(mnt_).empty());
}

// Refused before the array is assembled: one line naming what is wrong, and no member
// changes by a byte (no event count, no superblock time, no bitmap header).
TEST_F(FstabMount, RefusedMountsChangeNothingOnTheMembers) {
  if (std::getenv("STRIPEFS_TEST_TARGET") != nullptr) GTEST_SKIP() << "needs the daemon";
  // cksum (CRC-32, fast): reading 1 GiB byte by byte in the sanitizer build took minutes.
  const std::string checksums = "cd '" + dir_ + "' && cksum m0 m1 m2 m3";
  const Command before = run(checksums);
  ASSERT_EQ(before.status, 0) << before.output;
  const std::string daemon = bin_dir_ + "/stripefs";
  const std::string plain = dir_ + "/plain";
  std::ofstream(plain) << "not a directory";
  const std::pair<std::string, std::string> refusals[] = {
      {"-o bogus '" + source_ + "' '" + mnt_ + "'",
       "bad FUSE options: unknown option(s): `-o bogus'"},
      {"-o writeback_delay=nan '" + source_ + "' '" + mnt_ + "'",
       "writeback_delay=nan: not a positive number of seconds"},
      {"'" + source_ + "' '" + plain + "'", "mountpoint " + plain + ": not a directory"},
      {"'" + source_ + "' '" + dir_ + "/m0'", "mountpoint " + dir_ + "/m0: not a directory"},
      {"'" + source_ + "' '" + dir_ + "/none'",
       "mountpoint " + dir_ + "/none: No such file or directory"},
  };
  for (const auto& [arguments, expected] : refusals) {
    const Command c = run(daemon + " -f " + arguments);
    EXPECT_NE(c.status, 0) << arguments;
    EXPECT_EQ(c.output, "stripefs: " + expected +
                            (expected.starts_with("bad FUSE") ? " (see stripefs --help)" : "") +
                            "\n")
        << arguments;
  }
  EXPECT_TRUE(fstype_of(mnt_).empty());
  EXPECT_EQ(run(checksums).output, before.output);
}

}  // namespace
}  // namespace stripefs::test
