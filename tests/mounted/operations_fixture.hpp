// The fixture of the operations tests (operations_test.cpp, replace_test.cpp): a mounted
// stripefs at a chosen level, stripefsctl run against it, new devices, and a writer whose
// files are checked afterwards.
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "mounted/array_check.hpp"
#include "mounted/mounted_fixture.hpp"

namespace stripefs::test {

constexpr uint64_t kMemberSize = 96 * kMiB;
constexpr size_t kFileSize = 192 * kKiB;
constexpr uint64_t kFiles = 64;  // 12 MiB, rewritten over and over

struct Level {
  const char* level;
  unsigned members;
};

// stripefsctl with `args`; its exit status and what it printed (stdout and stderr).
struct Ctl {
  int status = -1;
  std::string out;
};
inline Ctl stripefsctl(const std::string& args) {
  std::string program = STRIPEFSCTL_PATH;
  if (const char* env = std::getenv("STRIPEFSCTL_PATH")) program = env;
  Ctl result;
  FILE* pipe = popen((program + " " + args + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.out.append(buffer, n);
  const int status = pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

class Operations : public ::testing::Test {
 protected:
  void start(Level level, const std::string& options = "") {
    fs_.set_level(level.level, level.members);
    fs_.set_member_size(kMemberSize);
    fs_.set_mount_options(options);
    const Status mounted = fs_.mount();
    ASSERT_TRUE(mounted) << mounted.error();
  }
  void TearDown() override {
    if (fs_.mounted()) {
      const Status done = fs_.unmount();
      EXPECT_TRUE(done) << done.error();
    }
    if (HasFailure()) std::cerr << "daemon log:\n" << fs_.log_tail() << "\n";
  }
  std::string mnt() const { return "'" + fs_.root().string() + "'"; }
  Ctl ctl(const std::string& command, const std::string& args = "") {
    return stripefsctl(command + " " + mnt() + (args.empty() ? "" : " " + args));
  }
  nlohmann::json status() {
    auto s = daemon_query(fs_.root().string(), "status");
    EXPECT_TRUE(s) << s.error();
    return s ? *s : nlohmann::json::object();
  }
  std::filesystem::path device(const std::string& name) {
    std::string error;
    auto d = fs_.new_device(name, error);
    EXPECT_FALSE(d.empty()) << error;
    return d;
  }

  // Writes files of random data, each fsynced, over and over (kFiles names, each rewritten
  // with new data) until `stop_`; remembers what each file holds.
  void writer() {
    for (uint64_t i = 0; !stop_.load(); ++i) {
      const std::string name = "w" + std::to_string(i % kFiles);
      const Bytes data = random_bytes(kFileSize, i + 1);
      Fd fd = open_file(path(name), O_WRONLY | O_CREAT | O_TRUNC);
      if (!fd.valid() || !write_at(fd.get(), data, 0) || fsync(fd.get()) != 0) {
        ADD_FAILURE() << "writing " << name << ": " << errno_name(errno);
        return;
      }
      std::lock_guard lock(mutex_);
      written_[i % kFiles] = i + 1;
      ++writes_;
    }
  }
  void start_writer() {
    stop_ = false;
    writer_ = std::thread([this] { writer(); });
    while (files() < 8 && !HasFailure()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  void stop_writer() {
    stop_ = true;
    if (writer_.joinable()) writer_.join();
  }
  size_t files() {
    std::lock_guard lock(mutex_);
    return writes_;
  }
  std::string path(const std::string& rel) const { return fs_.path(rel); }
  // Every file the writer finished reads back as written, from the members (the kernel's
  // page cache dropped first).
  void expect_files() {
    sync();
    std::ofstream("/proc/sys/vm/drop_caches") << "3\n";
    std::lock_guard lock(mutex_);
    for (const auto& [file, seed] : written_) {
      const std::string name = "w" + std::to_string(file);
      EXPECT_TRUE(same_bytes(read_file(path(name)), random_bytes(kFileSize, seed))) << name;
    }
  }
  // Waits for the running task with `status --wait`, which must succeed.
  void wait_task() {
    const Ctl waited = ctl("status --wait");
    ASSERT_EQ(waited.status, 0) << waited.out;
  }
  // Unmounted: parity (or the copies) must match on `members`.
  void expect_consistent(const std::vector<std::filesystem::path>& members) {
    auto bad = inconsistent_stripes(members);
    ASSERT_TRUE(bad) << bad.error();
    EXPECT_EQ(*bad, 0u);
  }

  // Role 0 is `device`'s now: unmounted, parity (or the copies) checks clean on the new set
  // of members; mounted from it again, the array loses member 1 and every file still reads.
  void expect_new_set_holds(const std::filesystem::path& device) {
    std::vector<std::filesystem::path> members = fs_.members();
    members[0] = device;
    fs_.set_members(members);
    const Status unmounted = fs_.unmount();
    ASSERT_TRUE(unmounted) << unmounted.error();
    ASSERT_NO_FATAL_FAILURE(expect_consistent(members));
    const Status mounted = fs_.mount();
    ASSERT_TRUE(mounted) << mounted.error();
    const Ctl second = ctl("fail", "1");
    ASSERT_EQ(second.status, 0) << second.out;
    ASSERT_NO_FATAL_FAILURE(expect_files());
  }

  MountedFs fs_;
  std::atomic<bool> stop_{false};
  std::thread writer_;
  std::mutex mutex_;
  std::map<uint64_t, uint64_t> written_;  // file number: the seed of its data
  size_t writes_ = 0;
};

}  // namespace stripefs::test
