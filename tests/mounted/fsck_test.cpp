// fsck.stripefs as users and fsck(8) run it, on member files: e2fsck's exit codes, a check
// without -y that changes no byte, a superblock wrong on one member found and repaired from
// redundancy, a filesystem left by a killed daemon, and `fsck -t stripefs` and `fsck -A`
// from an fstab finding the program (fsck.fuse.stripefs for fstab's type).
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "mounted/array_check.hpp"
#include "mounted/command.hpp"
#include "mounted/mounted_fixture.hpp"

namespace stripefs::test {
namespace {

namespace fsys = std::filesystem;

class Fsck : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::getenv("STRIPEFS_TEST_TARGET") != nullptr) GTEST_SKIP() << "needs the programs";
    char name[] = "/var/tmp/stripefs-fsck-XXXXXX";
    ASSERT_NE(mkdtemp(name), nullptr);
    dir_ = name;
    mnt_ = dir_ + "/mnt";
    fsys::create_directory(mnt_);
    for (int i = 0; i < 4; ++i) {
      const std::string m = dir_ + "/m" + std::to_string(i);
      fsys::resize_file((std::ofstream(m), m), 128ull << 20);
      source_ += (i ? ":" : "") + m;
    }
    bin_ = fsys::path(STRIPEFS_MOUNT_PATH).parent_path().string();
    const Command made = run(std::string(STRIPEFS_MKFS_PATH) + " -q -l 5 -n 4 -c 64K " + dir_ +
                             "/m0 " + dir_ + "/m1 " + dir_ + "/m2 " + dir_ + "/m3");
    ASSERT_EQ(made.status, 0) << made.output;
    ASSERT_NO_FATAL_FAILURE(mount());
    fsys::create_directories(mnt_ + "/a/b");
    for (int i = 0; i < 20; ++i) std::ofstream(mnt_ + "/a/b/f" + std::to_string(i)) << i << "\n";
    { std::ofstream(mnt_ + "/big") << std::string(3 << 20, 'x'); }
    ASSERT_NO_FATAL_FAILURE(unmount());
  }
  void TearDown() override {
    if (dir_.empty()) return;
    run("umount -l '" + mnt_ + "'");
    wait_for_daemon_exit();
    fsys::remove_all(dir_);
  }
  void mount() {
    const Command c = run(std::string(STRIPEFS_MOUNT_PATH) + " '" + source_ + "' '" + mnt_ + "'");
    ASSERT_EQ(c.status, 0) << c.output;
  }
  void unmount() {
    const Command c = run("umount '" + mnt_ + "'");
    ASSERT_EQ(c.status, 0) << c.output;
    ASSERT_TRUE(wait_for_daemon_exit());
  }
  bool wait_for_daemon_exit() { return wait_for_unlock(dir_ + "/m0"); }
  Command fsck(const std::string& flags) {
    return run(std::string(STRIPEFS_FSCK_PATH) + " " + flags + " '" + source_ + "'");
  }
  std::string members_cksum() { return run("cd '" + dir_ + "' && cksum m0 m1 m2 m3").output; }
  void expect_files() {
    std::string line;
    std::getline(std::ifstream(mnt_ + "/a/b/f7"), line);
    EXPECT_EQ(line, "7");
    EXPECT_EQ(fsys::file_size(mnt_ + "/big"), 3u << 20);
  }
  std::string dir_, mnt_, source_, bin_;
};

TEST_F(Fsck, ExitCodesAreE2fscks) {
  const Command clean = fsck("");
  EXPECT_EQ(clean.status, 0) << clean.output;
  EXPECT_NE(clean.output.find(": clean, "), std::string::npos) << clean.output;
  const Command forced = fsck("-f -c --parity");
  EXPECT_EQ(forced.status, 0) << forced.output;
  EXPECT_NE(forced.output.find("directories)"), std::string::npos) << forced.output;
  const Command both = fsck("-n -y");
  EXPECT_EQ(both.status, 16) << both.output;
  EXPECT_EQ(both.output, "fsck.stripefs: -n and -y exclude each other\n");
  EXPECT_EQ(fsck("--bogus").status, 16);
  const Command missing = run(std::string(STRIPEFS_FSCK_PATH) + " " + dir_ + "/none");
  EXPECT_EQ(missing.status, 8) << missing.output;
  ASSERT_NO_FATAL_FAILURE(mount());
  const Command busy = fsck("-f");
  EXPECT_EQ(busy.status, 8) << busy.output;
  EXPECT_NE(busy.output.find("in use"), std::string::npos) << busy.output;
  ASSERT_NO_FATAL_FAILURE(expect_files());
}

// The filesystem superblock wrong on the member that holds it: a read-only check names it
// and writes nothing; -y rewrites it from parity; then all is clean and it mounts.
TEST_F(Fsck, ASuperblockWrongOnOneMemberIsRepairedFromRedundancy) {
  const fsys::path m0 = dir_ + "/m0";
  auto offset = member_data_offset(m0);
  ASSERT_TRUE(offset) << offset.error();
  {
    std::fstream f(m0, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(*offset + 64));
    f.write("garbage!garbage!", 16);
  }
  const std::string before = members_cksum();
  const Command found = fsck("-n");
  EXPECT_EQ(found.status, 4) << found.output;
  EXPECT_NE(found.output.find("filesystem superblock (volume block 0): wrong on member 0"),
            std::string::npos)
      << found.output;
  EXPECT_EQ(members_cksum(), before) << "fsck -n wrote";
  const Command repaired = fsck("-y");
  EXPECT_EQ(repaired.status, 1) << repaired.output;
  EXPECT_NE(repaired.output.find("WAS MODIFIED"), std::string::npos) << repaired.output;
  const Command again = fsck("-f");
  EXPECT_EQ(again.status, 0) << again.output;
  ASSERT_NO_FATAL_FAILURE(mount());
  ASSERT_NO_FATAL_FAILURE(expect_files());
}

// A daemon killed once its changes are committed: the check reads through the journal it left and
// finds the filesystem whole; -p replays it and marks the filesystem clean.
TEST_F(Fsck, AFilesystemLeftByAKilledDaemonChecksWhole) {
  const Command started =
      run(std::string(STRIPEFS_MOUNT_PATH) + " -f -o commit_interval=1,writeback_delay=1 '" +
          source_ + "' '" + mnt_ + "' >/dev/null 2>&1 & echo $!");
  const pid_t pid = std::stoi(started.output);
  for (int i = 0; i < 100 && !fsys::exists(mnt_ + "/big"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  fsys::create_directories(mnt_ + "/after/crash");
  { std::ofstream(mnt_ + "/after/crash/file") << "kept\n"; }
  fsys::remove(mnt_ + "/a/b/f3");
  // Committed by the daemon's timer (sync(2) does not reach a FUSE filesystem's journal).
  std::this_thread::sleep_for(std::chrono::milliseconds(3000));
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  run("umount -l '" + mnt_ + "'");
  ASSERT_TRUE(wait_for_daemon_exit());
  const std::string before = members_cksum();
  const Command found = fsck("-n");
  EXPECT_EQ(found.status, 0) << found.output;
  EXPECT_EQ(found.output.find(": clean"), std::string::npos) << "a dirty filesystem was skipped";
  EXPECT_EQ(members_cksum(), before) << "fsck -n wrote";
  const Command preened = fsck("-p");
  EXPECT_LE(preened.status, 1) << preened.output;
  const Command again = fsck("");
  EXPECT_EQ(again.status, 0) << again.output;
  EXPECT_NE(again.output.find(": clean, "), std::string::npos) << again.output;
  ASSERT_NO_FATAL_FAILURE(mount());
  ASSERT_NO_FATAL_FAILURE(expect_files());
  std::string line;
  std::getline(std::ifstream(mnt_ + "/after/crash/file"), line);
  EXPECT_EQ(line, "kept");
  EXPECT_FALSE(fsys::exists(mnt_ + "/a/b/f3"));
}

// fsck(8) runs fsck.TYPE: by -t, and from an fstab line by its type, fuse.stripefs.
TEST_F(Fsck, FsckFindsItByTypeAndFromFstab) {
  const std::string path = "PATH='" + bin_ + "':\"$PATH\" ";
  const Command typed = run(path + "fsck -t stripefs '" + source_ + "'");
  EXPECT_EQ(typed.status, 0) << typed.output;
  EXPECT_NE(typed.output.find("fsck.stripefs"), std::string::npos) << typed.output;
  const std::string fstab = dir_ + "/fstab";
  std::ofstream(fstab) << source_ << " " << mnt_ << " fuse.stripefs defaults 0 2\n";
  const Command all = run(path + "LIBMOUNT_FSTAB='" + fstab + "' fsck -A -f");
  EXPECT_EQ(all.status, 0) << all.output;
  EXPECT_NE(all.output.find("directories)"), std::string::npos) << all.output;
}

}  // namespace
}  // namespace stripefs::test
