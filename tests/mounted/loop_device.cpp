#include "mounted/loop_device.hpp"

#include <fcntl.h>
#include <linux/loop.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace stripefs::test {

namespace {

std::string failed(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

}  // namespace

std::expected<LoopDevice, std::string> LoopDevice::attach(const std::filesystem::path& file) {
  const int control = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
  if (control < 0) return std::unexpected(failed("/dev/loop-control"));
  const int backing = open(file.c_str(), O_RDWR | O_CLOEXEC);
  if (backing < 0) {
    close(control);
    return std::unexpected(failed(file.string()));
  }
  // Another process may take the free device first: try again with the next.
  for (int attempt = 0; attempt < 8; ++attempt) {
    const int n = ioctl(control, LOOP_CTL_GET_FREE);
    if (n < 0) break;
    const std::string path = "/dev/loop" + std::to_string(n);
    const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) continue;
    loop_config config{};
    config.fd = static_cast<uint32_t>(backing);
    config.info.lo_flags = LO_FLAGS_AUTOCLEAR;
    if (ioctl(fd, LOOP_CONFIGURE, &config) == 0) {
      close(backing);
      close(control);
      return LoopDevice(path, file, fd);
    }
    close(fd);
  }
  const std::string error = failed("attaching a loop device to " + file.string());
  close(backing);
  close(control);
  return std::unexpected(error);
}

LoopDevice::LoopDevice(LoopDevice&& other) noexcept
    : path_(std::move(other.path_)), file_(std::move(other.file_)), fd_(other.fd_) {
  other.fd_ = -1;
}

LoopDevice::~LoopDevice() {
  if (fd_ >= 0) close(fd_);
}

std::expected<void, std::string> LoopDevice::shrink(uint64_t bytes) {
  if (truncate(file_.c_str(), static_cast<off_t>(bytes)) != 0) {
    return std::unexpected(failed("truncating " + file_.string()));
  }
  if (ioctl(fd_, LOOP_SET_CAPACITY, 0) != 0) {
    return std::unexpected(failed("re-reading the capacity of " + path_.string()));
  }
  return {};
}

}  // namespace stripefs::test
