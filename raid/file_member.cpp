#include "raid/file_member.hpp"

#include <fcntl.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "raid/local_ring.hpp"
#include "raid/log.hpp"

namespace stripefs {

namespace {

bool read_sysfs_number(const std::filesystem::path& path, uint64_t& value) {
  std::ifstream in(path);
  return static_cast<bool>(in >> value);
}

bool read_sysfs_word(const std::filesystem::path& path, std::string& value) {
  std::ifstream in(path);
  return static_cast<bool>(in >> value);
}

}  // namespace

Result<DeviceLimits> block_device_limits(unsigned major, unsigned minor) {
  std::filesystem::path dev = fmt::format("/sys/dev/block/{}:{}", major, minor);
  std::error_code ec;
  dev = std::filesystem::canonical(dev, ec);
  if (ec) return fail(ENODEV, "no sysfs entry for block device {}:{}", major, minor);
  if (std::filesystem::exists(dev / "partition")) dev = dev.parent_path();
  const auto queue = dev / "queue";
  DeviceLimits limits;
  uint64_t v = 0;
  if (read_sysfs_number(queue / "logical_block_size", v) && v) limits.logical_block = v;
  if (read_sysfs_number(queue / "physical_block_size", v) && v) limits.physical_block = v;
  if (read_sysfs_number(queue / "minimum_io_size", v) && v) limits.minimum_io = v;
  if (read_sysfs_number(queue / "optimal_io_size", v)) limits.optimal_io = v;
  if (read_sysfs_number(queue / "max_sectors_kb", v) && v) limits.max_io = v * 1024;
  if (read_sysfs_number(queue / "rotational", v)) limits.rotational = v != 0;
  if (read_sysfs_number(queue / "dax", v)) limits.dax = v != 0;
  std::string cache;
  if (read_sysfs_word(queue / "write_cache", cache)) limits.volatile_cache = cache == "write";
  return limits;
}

Result<std::unique_ptr<FileMember>> FileMember::open(const std::string& path, IoEngine& engine,
                                                     InMemory in_memory_io) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return fail(errno, "member {}: {}", path, std::strerror(errno));
  }
  const bool block = S_ISBLK(st.st_mode);
  if (!block && !S_ISREG(st.st_mode)) {
    return fail(EINVAL, "member {}: not a block device or regular file", path);
  }
  // A file on tmpfs lives in memory already: O_DIRECT there bypasses nothing, and io_uring
  // hands such reads to a worker thread (tens of microseconds, against a few buffered).
  struct statfs on {};
  const bool in_memory = in_memory_io == InMemory::automatic && !block &&
                         ::statfs(path.c_str(), &on) == 0 && on.f_type == TMPFS_MAGIC;
  int flags = O_RDWR | O_CLOEXEC | (in_memory ? 0 : O_DIRECT) | (block ? O_EXCL : 0);
  int fd = ::open(path.c_str(), flags);
  bool direct = !in_memory;
  if (fd < 0 && errno == EINVAL && !block) {
    // Some filesystems (older tmpfs, some FUSE mounts) refuse O_DIRECT on files.
    raid_log().warn("member {}: O_DIRECT refused, falling back to buffered I/O", path);
    direct = false;
    fd = ::open(path.c_str(), flags & ~O_DIRECT);
  }
  if (fd < 0) return fail(errno, "member {}: {}", path, std::strerror(errno));

  DeviceLimits limits;
  uint64_t size = 0;
  if (block) {
    auto discovered = block_device_limits(major(st.st_rdev), minor(st.st_rdev));
    if (!discovered) {
      ::close(fd);
      return fail(discovered.error().code, "member {}: {}", path, discovered.error().message);
    }
    limits = *discovered;
    if (ioctl(fd, BLKGETSIZE64, &size) != 0) {
      int e = errno;
      ::close(fd);
      return fail(e, "member {}: BLKGETSIZE64: {}", path, std::strerror(e));
    }
  } else {
    struct statx sx {};
    size = static_cast<uint64_t>(st.st_size);
    limits.physical_block = st.st_blksize ? static_cast<uint32_t>(st.st_blksize) : 4096;
    limits.minimum_io = limits.physical_block;
    limits.optimal_io = 0;
    limits.logical_block = 512;
    if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 && (sx.stx_mask & STATX_DIOALIGN) &&
        sx.stx_dio_offset_align != 0) {
      limits.logical_block = std::max<uint32_t>(sx.stx_dio_offset_align, 512);
    }
  }
  return std::unique_ptr<FileMember>(
      new FileMember(path, size, limits, fd, engine, direct, block, in_memory));
}

FileMember::FileMember(std::string name, uint64_t size, DeviceLimits limits, int fd,
                       IoEngine& engine, bool direct, bool block_device, bool inline_io)
    : Member(std::move(name), size, limits),
      fd_(fd),
      engine_(engine),
      direct_(direct),
      block_device_(block_device),
      inline_io_(inline_io) {}

FileMember::~FileMember() {
  ::close(fd_);
}

void FileMember::submit(MemberRequest request) {
  if (!inline_io_) {
    // A thread that reaps its own ring takes the request there (local_ring.hpp).
    if (LocalRing::try_submit(fd_, request)) return;
    engine_.submit(fd_, std::move(request));
    return;
  }
  // A file in memory (tmpfs): the "I/O" is a copy to or from the page cache, done here and
  // now, as memory members do; handing it to the ring thread would cost two wake-ups.
  int64_t result = 0;
  switch (request.op) {
    case MemberOp::flush:
      result = fdatasync(fd_) == 0 ? 0 : -errno;
      break;
    case MemberOp::read:
    case MemberOp::write: {
      const auto count = static_cast<int>(request.iov.size());
      uint64_t offset = request.offset;
      const uint64_t total = request.length();
      int64_t done = 0;
      // Short transfers are retried until nothing more moves.
      while (static_cast<uint64_t>(done) < total) {
        std::vector<iovec> rest;
        uint64_t skip = static_cast<uint64_t>(done);
        for (int i = 0; i < count; ++i) {
          iovec v = request.iov[i];
          if (skip >= v.iov_len) {
            skip -= v.iov_len;
            continue;
          }
          v.iov_base = static_cast<char*>(v.iov_base) + skip;
          v.iov_len -= skip;
          skip = 0;
          rest.push_back(v);
        }
        const int flags = request.fua ? RWF_DSYNC : 0;
        const ssize_t n = request.op == MemberOp::read
                              ? preadv2(fd_, rest.data(), static_cast<int>(rest.size()),
                                        static_cast<off_t>(offset), 0)
                              : pwritev2(fd_, rest.data(), static_cast<int>(rest.size()),
                                         static_cast<off_t>(offset), flags);
        if (n < 0) {
          if (errno == EINTR) continue;
          done = -errno;
          break;
        }
        if (n == 0) break;  // past the end: a short transfer, as io_uring reports it
        done += n;
        offset += static_cast<uint64_t>(n);
      }
      result = done;
      break;
    }
  }
  if (request.done) request.done(result);
}

}  // namespace stripefs
