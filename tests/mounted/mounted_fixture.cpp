#include "mounted/mounted_fixture.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <iostream>
#include <random>
#include <thread>

namespace stripefs::test {

int Fd::close() {
  if (fd_ < 0) return 0;
  return ::close(std::exchange(fd_, -1));
}

void Fd::reset() {
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
}

void MountedTest::SetUp() {
  fs_.set_mount_options(mount_options());
  if (member_size() != 0) fs_.set_member_size(member_size());
  const Status mounted = fs_.mount();
  log_shown_ = !mounted;  // the message carries the log
  ASSERT_TRUE(mounted) << mounted.error();
}

void MountedTest::TearDown() {
  if (fs_.can_remount() && fs_.mounted()) {
    const Status unmounted = fs_.unmount();
    if (!unmounted) log_shown_ = true;
    EXPECT_TRUE(unmounted) << unmounted.error();
  }
  if (HasFailure() && !log_shown_ && !fs_.log_path().empty()) {
    std::cerr << "--- " << fs_.log_path().string() << " (end) ---\n" << fs_.log_tail();
  }
}

bool MountedTest::target_lacks(int err) const {
  return fs_.is_target() && (err == EOPNOTSUPP || err == ENOTTY || err == ENOSYS);
}

std::string errno_name(int err) {
  const char* name = strerrorname_np(err);
  return name ? std::string(name) : "errno " + std::to_string(err);
}

::testing::AssertionResult fails_with(long result, int err, int expected, const char* expr) {
  if (result == -1 && err == expected) return ::testing::AssertionSuccess();
  if (result != -1) {
    return ::testing::AssertionFailure()
           << expr << " returned " << result << ", expected failure with " << errno_name(expected);
  }
  return ::testing::AssertionFailure()
         << expr << " failed with " << errno_name(err) << ", expected " << errno_name(expected);
}

::testing::AssertionResult succeeds(long result, int err, const char* expr) {
  if (result != -1) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << expr << " failed: " << errno_name(err) << " (" << std::strerror(err) << ")";
}

Fd open_file(const std::string& path, int flags, mode_t mode) {
  Fd fd(open(path.c_str(), flags | O_CLOEXEC, mode));
  if (!fd.valid()) ADD_FAILURE() << "open " << path << ": " << errno_name(errno);
  return fd;
}

bool write_at(int fd, const Bytes& data, off_t offset) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n =
        pwrite(fd, data.data() + done, data.size() - done, offset + static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ADD_FAILURE() << "pwrite of " << data.size() - done << " bytes at "
                    << offset + static_cast<off_t>(done) << ": "
                    << (n == 0 ? "wrote nothing" : errno_name(errno));
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

Bytes read_at(int fd, off_t offset, size_t size) {
  Bytes data(size);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = pread(fd, data.data() + done, size - done, offset + static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ADD_FAILURE() << "pread of " << size - done << " bytes at "
                    << offset + static_cast<off_t>(done) << ": " << errno_name(errno);
      break;
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  data.resize(done);
  return data;
}

bool write_file(const std::string& path, const Bytes& data) {
  Fd fd = open_file(path, O_WRONLY | O_CREAT | O_TRUNC);
  if (!fd.valid() || !write_at(fd.get(), data, 0)) return false;
  if (fd.close() != 0) {
    ADD_FAILURE() << "close " << path << ": " << errno_name(errno);
    return false;
  }
  return true;
}

Bytes read_file(const std::string& path) {
  Fd fd = open_file(path, O_RDONLY);
  if (!fd.valid()) return {};
  const struct stat st = fstat_of(fd.get());
  // Read past the size stat reports, so a file longer than it claims is caught too.
  return read_at(fd.get(), 0, static_cast<size_t>(st.st_size) + 4096);
}

struct stat stat_of(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    ADD_FAILURE() << "stat " << path << ": " << errno_name(errno);
    st = {};
  }
  return st;
}

struct stat lstat_of(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    ADD_FAILURE() << "lstat " << path << ": " << errno_name(errno);
    st = {};
  }
  return st;
}

struct stat fstat_of(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    ADD_FAILURE() << "fstat " << fd << ": " << errno_name(errno);
    st = {};
  }
  return st;
}

std::vector<std::string> list_dir(const std::string& path) {
  std::vector<std::string> names;
  DIR* dir = opendir(path.c_str());
  if (!dir) {
    ADD_FAILURE() << "opendir " << path << ": " << errno_name(errno);
    return names;
  }
  errno = 0;
  while (const dirent* entry = readdir(dir)) names.emplace_back(entry->d_name);
  if (errno != 0) ADD_FAILURE() << "readdir " << path << ": " << errno_name(errno);
  closedir(dir);
  return names;
}

Bytes random_bytes(size_t size, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Bytes data(size);
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    const uint64_t word = rng();
    std::memcpy(data.data() + i, &word, 8);
  }
  for (; i < size; ++i) data[i] = static_cast<uint8_t>(rng());
  return data;
}

Bytes to_bytes(std::string_view text) {
  return Bytes(text.begin(), text.end());
}

bool all_zero(const Bytes& data) {
  for (uint8_t byte : data) {
    if (byte != 0) return false;
  }
  return true;
}

::testing::AssertionResult same_bytes(const Bytes& got, const Bytes& want) {
  const size_t common = std::min(got.size(), want.size());
  for (size_t i = 0; i < common; ++i) {
    if (got[i] != want[i]) {
      return ::testing::AssertionFailure()
             << "first difference at byte " << i << ": got " << int{got[i]} << ", want "
             << int{want[i]} << " (sizes " << got.size() << " and " << want.size() << ")";
    }
  }
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure()
           << "got " << got.size() << " bytes, want " << want.size() << " (equal up to there)";
  }
  return ::testing::AssertionSuccess();
}

int64_t nanoseconds(const timespec& t) {
  return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

timespec now_realtime() {
  timespec t{};
  clock_gettime(CLOCK_REALTIME, &t);
  return t;
}

void let_clock_tick() {
  // The kernel stamps times from a clock that advances once per tick (up to 10 ms).
  std::this_thread::sleep_for(std::chrono::milliseconds(25));
}

}  // namespace stripefs::test
