#include "raid/member_devices.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include "raid/aligned_buffer.hpp"
#include "raid/superblock.hpp"

namespace stripefs {

OpenedDevice::OpenedDevice(OpenedDevice&& other) noexcept
    : member(std::move(other.member)), lock(std::exchange(other.lock, -1)) {}

OpenedDevice& OpenedDevice::operator=(OpenedDevice&& other) noexcept {
  if (this != &other) {
    member = std::move(other.member);
    if (lock >= 0) close(lock);
    lock = std::exchange(other.lock, -1);
  }
  return *this;
}

OpenedDevice::~OpenedDevice() {
  member.reset();
  if (lock >= 0) close(lock);
}

Devices::~Devices() {
  added.clear();
  journal.reset();
  members.clear();
  engine.reset();
  for (int fd : locks) close(fd);
}

std::vector<Member*> Devices::member_pointers() const {
  std::vector<Member*> out;
  for (const auto& m : members) out.push_back(m.get());
  return out;
}

Member* Devices::adopt(OpenedDevice device) {
  added.push_back(std::move(device));
  return added.back().member.get();
}

std::vector<std::string> split_device_list(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (const std::string& arg : args) {
    std::stringstream in(arg);
    std::string part;
    while (std::getline(in, part, ':')) {
      if (!part.empty()) out.push_back(part);
    }
  }
  return out;
}

Result<int> lock_device(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(errno, "{}: {}", path, strerror(errno));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    close(fd);
    if (e == EWOULDBLOCK) return fail(EBUSY, "{}: in use by another stripefs process", path);
    return fail(e, "{}: cannot lock: {}", path, strerror(e));
  }
  return fd;
}

Result<std::unique_ptr<Devices>> open_devices(const std::vector<std::string>& paths,
                                              const std::string& journal) {
  auto devices = std::make_unique<Devices>();
  std::set<std::string> seen;
  for (const std::string& p : paths) {
    char resolved[PATH_MAX];
    const std::string key = realpath(p.c_str(), resolved) != nullptr ? resolved : p;
    if (!seen.insert(key).second) return fail(EINVAL, "{}: given twice", p);
  }
  std::vector<std::string> all = paths;
  if (!journal.empty()) all.push_back(journal);
  for (const std::string& p : all) {
    auto fd = lock_device(p);
    if (!fd) return fail(fd.error());
    devices->locks.push_back(*fd);
  }
  auto engine = IoEngine::create(256);
  if (!engine) return fail(engine.error());
  devices->engine = std::move(*engine);
  for (const std::string& p : paths) {
    auto member = FileMember::open(p, *devices->engine);
    if (!member) return fail(member.error());
    devices->members.push_back(std::move(*member));
  }
  if (!journal.empty()) {
    auto member = FileMember::open(journal, *devices->engine);
    if (!member) return fail(member.error());
    devices->journal = std::move(*member);
  }
  return devices;
}

Result<OpenedDevice> open_device(const std::string& path, IoEngine& engine) {
  OpenedDevice device;
  auto fd = lock_device(path);
  if (!fd) return fail(fd.error());
  device.lock = *fd;
  auto member = FileMember::open(path, engine);
  if (!member) return fail(member.error());
  device.member = std::move(*member);
  return device;
}

Result<std::vector<std::string>> find_array_members(const std::string& text) {
  auto uuid = parse_uuid(text);
  if (!uuid) return fail(EINVAL, "UUID={}: {}", text, uuid.error().message);
  std::ifstream partitions("/proc/partitions");
  std::string line;
  std::vector<std::string> found;
  AlignedBuffer block(kSuperblockSize);
  while (std::getline(partitions, line)) {
    std::istringstream fields(line);
    unsigned major = 0, minor = 0;
    uint64_t blocks = 0;
    std::string name;
    if (!(fields >> major >> minor >> blocks >> name)) continue;
    const std::string path = "/dev/" + name;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    const ssize_t n = pread(fd, block.data(), kSuperblockSize, kSuperblockOffset);
    close(fd);
    if (n != static_cast<ssize_t>(kSuperblockSize)) continue;
    auto sb = decode_superblock(
        std::span<const std::byte, kSuperblockSize>(block.data(), kSuperblockSize), path);
    if (sb && sb->array_uuid == *uuid) found.push_back(path);
  }
  if (found.empty())
    return fail(ENODEV, "UUID={}: no block device holds a member of that array", text);
  return found;
}

}  // namespace stripefs
