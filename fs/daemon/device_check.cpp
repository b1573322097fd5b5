#include "fs/daemon/device_check.hpp"

#include <blkid/blkid.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>

namespace stripefs::fs {

Result<std::string> signature_of(const std::string& path) {
  if (access(path.c_str(), R_OK | W_OK) != 0) return fail(errno, "{}: {}", path, strerror(errno));
  blkid_probe probe = blkid_new_probe_from_filename(path.c_str());
  if (probe == nullptr) return fail(EIO, "{}: libblkid cannot probe it", path);
  blkid_probe_enable_superblocks(probe, 1);
  blkid_probe_set_superblocks_flags(probe, BLKID_SUBLKS_TYPE);
  blkid_probe_enable_partitions(probe, 1);
  std::string found;
  const int rc = blkid_do_safeprobe(probe);
  const char* value = nullptr;
  if (rc == 0) {
    if (blkid_probe_lookup_value(probe, "TYPE", &value, nullptr) == 0 ||
        blkid_probe_lookup_value(probe, "PTTYPE", &value, nullptr) == 0) {
      found = value;
    } else {
      found = "unknown";
    }
  } else if (rc == -2) {
    found = "ambiguous signatures";
  }
  blkid_free_probe(probe);
  return found;
}

Result<void> wipe_signatures(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return fail(errno, "{}: {}", path, strerror(errno));
  blkid_probe probe = blkid_new_probe();
  Result<void> result;
  if (probe == nullptr || blkid_probe_set_device(probe, fd, 0, 0) != 0) {
    result = fail(EIO, "{}: cannot probe", path);
  } else {
    blkid_probe_enable_superblocks(probe, 1);
    blkid_probe_set_superblocks_flags(probe, BLKID_SUBLKS_MAGIC);
    blkid_probe_enable_partitions(probe, 1);
    blkid_probe_set_partitions_flags(probe, BLKID_PARTS_MAGIC);
    while (blkid_do_probe(probe) == 0) {
      if (blkid_do_wipe(probe, 0) != 0) {
        result = fail(EIO, "{}: cannot wipe a signature", path);
        break;
      }
    }
  }
  if (probe != nullptr) blkid_free_probe(probe);
  fsync(fd);
  close(fd);
  return result;
}

}  // namespace stripefs::fs
