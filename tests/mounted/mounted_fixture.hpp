// The gtest side of the mounted tests: a fixture that gives every test a fresh filesystem,
// and small helpers that turn system-call failures into readable test failures.
#pragma once

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mounted/mounted_fs.hpp"

namespace stripefs::test {

using Bytes = std::vector<uint8_t>;

constexpr uint64_t kKiB = uint64_t{1} << 10;
constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;

// A file descriptor, closed when it goes out of scope.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Closes now and returns what close() returned: an error reported at close is a result.
  int close();
  void reset();

 private:
  int fd_ = -1;
};

// Every mounted test's base: SetUp mounts a fresh filesystem (a new stripefs per test, or a
// new scratch directory in the target); TearDown unmounts it and requires the daemon to exit
// cleanly, and prints the daemon's log if the test failed.
class MountedTest : public ::testing::Test {
 protected:
  // The daemon's -o value for this fixture.
  virtual std::string mount_options() const { return {}; }
  // Each member file's size for this fixture (0: MountedFs's default).
  virtual uint64_t member_size() const { return 0; }
  void SetUp() override;
  void TearDown() override;

  std::string path(std::string_view rel = {}) const { return fs_.path(rel); }
  // Whether err means "this filesystem lacks an optional feature" on a target that is not
  // stripefs: such a test skips there, while stripefs must have the feature.
  bool target_lacks(int err) const;

  MountedFs fs_;

 private:
  bool log_shown_ = false;  // a failure message already carried the daemon's log
};

std::string errno_name(int err);
::testing::AssertionResult fails_with(long result, int err, int expected, const char* expr);
::testing::AssertionResult succeeds(long result, int err, const char* expr);

// expr must return -1 and set errno to `expected`.
#define EXPECT_ERRNO(expected, expr)                                             \
  do {                                                                           \
    errno = 0;                                                                   \
    const long result_ = static_cast<long>(expr);                                \
    const int errno_ = errno;                                                    \
    EXPECT_TRUE(::stripefs::test::fails_with(result_, errno_, expected, #expr)); \
  } while (0)
#define ASSERT_ERRNO(expected, expr)                                             \
  do {                                                                           \
    errno = 0;                                                                   \
    const long result_ = static_cast<long>(expr);                                \
    const int errno_ = errno;                                                    \
    ASSERT_TRUE(::stripefs::test::fails_with(result_, errno_, expected, #expr)); \
  } while (0)
// expr must not return -1; on failure the message names errno.
#define EXPECT_SYS(expr)                                             \
  do {                                                               \
    errno = 0;                                                       \
    const long result_ = static_cast<long>(expr);                    \
    const int errno_ = errno;                                        \
    EXPECT_TRUE(::stripefs::test::succeeds(result_, errno_, #expr)); \
  } while (0)
#define ASSERT_SYS(expr)                                             \
  do {                                                               \
    errno = 0;                                                       \
    const long result_ = static_cast<long>(expr);                    \
    const int errno_ = errno;                                        \
    ASSERT_TRUE(::stripefs::test::succeeds(result_, errno_, #expr)); \
  } while (0)

// The helpers below record a non-fatal failure when a call fails and return an empty or
// invalid result, so a caller can ASSERT on that result.
Fd open_file(const std::string& path, int flags, mode_t mode = 0644);
// Writes all of data at offset (pwrite, retrying short writes).
bool write_at(int fd, const Bytes& data, off_t offset);
// Reads up to size bytes at offset; fewer only at end of file.
Bytes read_at(int fd, off_t offset, size_t size);
bool write_file(const std::string& path, const Bytes& data);
Bytes read_file(const std::string& path);
struct stat stat_of(const std::string& path);   // zeroed on failure
struct stat lstat_of(const std::string& path);  // zeroed on failure
struct stat fstat_of(int fd);                   // zeroed on failure
// Names in a directory, "." and ".." included, in readdir order.
std::vector<std::string> list_dir(const std::string& path);

Bytes random_bytes(size_t size, uint64_t seed);
Bytes to_bytes(std::string_view text);
bool all_zero(const Bytes& data);
// Equal, or a message naming the sizes or the first differing offset.
::testing::AssertionResult same_bytes(const Bytes& got, const Bytes& want);

int64_t nanoseconds(const timespec& t);
timespec now_realtime();
// Sleeps long enough that a timestamp taken afterwards differs from one taken before, even
// with the kernel's coarse clock.
void let_clock_tick();

}  // namespace stripefs::test
