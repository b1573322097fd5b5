// A loop device over a file, for tests that need a real block device as a member: the
// daemon then drives it as it drives a disk (O_DIRECT through io_uring), and the test can
// make it fail for real by shrinking it under the running filesystem (shrink()): the kernel
// then fails every request beyond its new end.
#pragma once

#include <cstdint>
#include <expected>
#include <filesystem>
#include <string>

namespace stripefs::test {

class LoopDevice {
 public:
  // Attaches `file` to a free loop device. The device goes away by itself (autoclear) once
  // this object and every other opener (the daemon) have closed it.
  static std::expected<LoopDevice, std::string> attach(const std::filesystem::path& file);
  LoopDevice(LoopDevice&& other) noexcept;
  LoopDevice& operator=(LoopDevice&&) = delete;
  ~LoopDevice();

  const std::filesystem::path& path() const { return path_; }
  // The backing file truncated to `bytes`, and the device's capacity read again from it.
  std::expected<void, std::string> shrink(uint64_t bytes);

 private:
  LoopDevice(std::filesystem::path path, std::filesystem::path file, int fd)
      : path_(std::move(path)), file_(std::move(file)), fd_(fd) {}

  std::filesystem::path path_;  // /dev/loopN
  std::filesystem::path file_;  // the backing file
  int fd_ = -1;                 // held open: the device lives while it is
};

}  // namespace stripefs::test
