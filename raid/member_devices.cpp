#include "raid/member_devices.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "raid/aligned_buffer.hpp"
#include "raid/pmem_member.hpp"
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

Result<MemberBackend> parse_member_backend(std::string_view text) {
  if (text == "auto") return MemberBackend::automatic;
  if (text == "block") return MemberBackend::block;
  if (text == "pmem") return MemberBackend::pmem;
  return fail(EINVAL, "backend '{}': not auto, block or pmem", text);
}

std::string_view to_string(MemberBackend backend) {
  switch (backend) {
    case MemberBackend::automatic:
      return "auto";
    case MemberBackend::block:
      return "block";
    case MemberBackend::pmem:
      return "pmem";
  }
  return "?";
}

std::string_view member_backend_name(const Member& member) {
  if (dynamic_cast<const PmemMember*>(&member) != nullptr) return "pmem";
  if (const auto* file = dynamic_cast<const FileMember*>(&member)) {
    return file->is_block_device() ? "block" : file->inline_io() ? "inline" : "file";
  }
  return "other";
}

namespace {

// Whether `path` is persistent memory that libpmem2 maps directly: a device DAX character
// device (its sysfs subsystem is "dax") or a file whose accesses are DAX.
bool is_persistent_memory(const std::string& path) {
  struct statx st {};
  if (statx(AT_FDCWD, path.c_str(), 0, STATX_TYPE, &st) != 0) return false;
  if (S_ISCHR(st.stx_mode)) {
    std::error_code ec;
    const auto subsystem = std::filesystem::read_symlink(
        fmt::format("/sys/dev/char/{}:{}/subsystem", st.stx_rdev_major, st.stx_rdev_minor), ec);
    return !ec && subsystem.filename() == "dax";
  }
  return S_ISREG(st.stx_mode) && (st.stx_attributes_mask & STATX_ATTR_DAX) != 0 &&
         (st.stx_attributes & STATX_ATTR_DAX) != 0;
}

}  // namespace

Result<std::unique_ptr<Member>> open_member(const std::string& path, IoEngine& engine,
                                            MemberBackend backend) {
  if (backend == MemberBackend::automatic) {
    backend = is_persistent_memory(path) ? MemberBackend::pmem : MemberBackend::block;
  }
  if (backend == MemberBackend::pmem) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISBLK(st.st_mode)) {
      return fail(EINVAL,
                  "member {}: backend=pmem maps DAX devices (/dev/dax*) and files, not block "
                  "devices: use backend=block, or a file on a DAX filesystem",
                  path);
    }
    auto member = PmemMember::open(path);
    if (!member) return fail(member.error());
    return std::unique_ptr<Member>(std::move(*member));
  }
  auto member = FileMember::open(path, engine);
  if (!member) return fail(member.error());
  return std::unique_ptr<Member>(std::move(*member));
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

namespace {

// The process that holds the flock of the file open as `fd`, from /proc/locks (0: none
// found). Its lines read "N: FLOCK  ADVISORY  WRITE PID MAJ:MIN:INODE 0 EOF", the device
// numbers in hex.
pid_t flock_holder(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return 0;
  const std::string file = fmt::format("{:02x}:{:02x}:{}", major(st.st_dev), minor(st.st_dev),
                                       static_cast<uint64_t>(st.st_ino));
  std::ifstream locks("/proc/locks");
  std::string line;
  while (std::getline(locks, line)) {
    std::istringstream in(line);
    std::string number, kind, mode, access, id;
    long pid = 0;
    if (!(in >> number >> kind) || kind != "FLOCK") continue;
    if (!(in >> mode >> access >> pid >> id)) continue;
    if (id == file) return static_cast<pid_t>(pid);
  }
  return 0;
}

// Whether process `pid` holds /dev/fuse open: a daemon whose mount is still in place.
bool serves_fuse(pid_t pid) {
  // Without throwing: the holder may exit while its descriptors are listed (which is what
  // a waiter waits for).
  std::error_code ec;
  const std::filesystem::path fds = fmt::format("/proc/{}/fd", pid);
  for (std::filesystem::directory_iterator it(fds, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code link_ec;
    if (std::filesystem::read_symlink(it->path(), link_ec) == "/dev/fuse") return true;
  }
  return false;
}

}  // namespace

Result<int> lock_device(const std::string& path, std::chrono::milliseconds wait) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(errno, "{}: {}", path, strerror(errno));
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    if (e == EWOULDBLOCK) {
      const pid_t holder = flock_holder(fd);
      const bool mounted = holder != 0 && serves_fuse(holder);
      // This process itself (the same device given twice under two names) is no one to
      // wait for.
      if (!mounted && holder != getpid() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      close(fd);
      if (holder == 0) return fail(EBUSY, "{}: in use by another stripefs process", path);
      return fail(EBUSY, "{}: in use by another stripefs process (pid {}{})", path, holder,
                  mounted ? ", mounted" : "");
    }
    close(fd);
    return fail(e, "{}: cannot lock: {}", path, strerror(e));
  }
  return fd;
}

Result<std::unique_ptr<Devices>> open_devices(const std::vector<std::string>& paths,
                                              const std::string& journal, MemberBackend backend,
                                              std::chrono::milliseconds wait) {
  auto devices = std::make_unique<Devices>();
  devices->backend = backend;
  std::set<std::string> seen;
  for (const std::string& p : paths) {
    char resolved[PATH_MAX];
    const std::string key = realpath(p.c_str(), resolved) != nullptr ? resolved : p;
    if (!seen.insert(key).second) return fail(EINVAL, "{}: given twice", p);
  }
  std::vector<std::string> all = paths;
  if (!journal.empty()) all.push_back(journal);
  for (const std::string& p : all) {
    auto fd = lock_device(p, wait);
    if (!fd) return fail(fd.error());
    devices->locks.push_back(*fd);
  }
  auto engine = IoEngine::create(256);
  if (!engine) return fail(engine.error());
  devices->engine = std::move(*engine);
  for (const std::string& p : paths) {
    auto member = open_member(p, *devices->engine, backend);
    if (!member) return fail(member.error());
    devices->members.push_back(std::move(*member));
  }
  if (!journal.empty()) {
    auto member = open_member(journal, *devices->engine, backend);
    if (!member) return fail(member.error());
    devices->journal = std::move(*member);
  }
  return devices;
}

Result<OpenedDevice> open_device(const std::string& path, IoEngine& engine, MemberBackend backend) {
  OpenedDevice device;
  auto fd = lock_device(path);
  if (!fd) return fail(fd.error());
  device.lock = *fd;
  auto member = open_member(path, engine, backend);
  if (!member) return fail(member.error());
  device.member = std::move(*member);
  return device;
}

std::optional<std::string> source_array_uuid(const std::vector<std::string>& sources) {
  if (sources.size() != 1) return std::nullopt;
  const std::string& s = sources[0];
  if (s.starts_with("UUID=") || s.starts_with("uuid=")) return s.substr(5);
  return std::nullopt;
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
