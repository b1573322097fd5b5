// Opening an array's member devices (and its journal device) for the executables: each
// locked with flock, then opened as a FileMember with the default InMemory::automatic (member
// files on tmpfs are driven inline: file_member.hpp).
#pragma once
#include <chrono>
#include <optional>
#include <memory>
#include <string>
#include <vector>
#include "raid/file_member.hpp"
#include "raid/io_engine.hpp"

namespace stripefs {

// A device opened on its own, as open_devices opens each: flock()ed, then a FileMember.
struct OpenedDevice {
  std::unique_ptr<FileMember> member;
  int lock = -1;  // the flock()ed descriptor, closed with the device
  OpenedDevice() = default;
  OpenedDevice(OpenedDevice&& other) noexcept;
  OpenedDevice& operator=(OpenedDevice&& other) noexcept;
  ~OpenedDevice();
};

struct Devices {
  std::unique_ptr<IoEngine> engine;
  std::vector<std::unique_ptr<FileMember>> members;
  std::unique_ptr<FileMember> journal;  // the stripe journal's device, when there is one
  std::vector<int> locks;               // flock()ed descriptors, one per device
  // Devices given to the array while it runs (rebuilds): kept until the end, as the array
  // needs its members to outlive it.
  std::vector<OpenedDevice> added;
  ~Devices();
  std::vector<Member*> member_pointers() const;
  Member* adopt(OpenedDevice device);
};

// How long opening members waits for a stripefs process that is letting go of them:
// `umount` returns as soon as the kernel has detached the mount, while the daemon is still
// writing back and closing the array (seconds, with a full cache). A mount, fsck or mkfs
// right after an umount waits for it instead of failing.
constexpr std::chrono::milliseconds kReleaseWait{30000};

// Takes `path`'s exclusive flock: the descriptor that holds it, or EBUSY when another
// stripefs process holds it. For up to `wait`, a holder that serves no FUSE session (a
// daemon closing after its unmount, an fsck, a mkfs) is waited for; one that serves a mount
// is refused at once.
Result<int> lock_device(const std::string& path,
                        std::chrono::milliseconds wait = std::chrono::milliseconds{0});

// Opens one more device on `engine` (which must outlive it), locked as open_devices does.
Result<OpenedDevice> open_device(const std::string& path, IoEngine& engine);

// Device arguments as users write them: several paths, or one joined by ':' (the form
// /etc/fstab and mount.fuse3 pass as the source).
std::vector<std::string> split_device_list(const std::vector<std::string>& args);

// Opens every path exclusively: a device another stripefs process holds is refused, so two
// daemons never drive one array (after waiting as lock_device does). `journal` may be empty.
Result<std::unique_ptr<Devices>> open_devices(const std::vector<std::string>& paths,
                                              const std::string& journal,
                                              std::chrono::milliseconds wait = kReleaseWait);

// The array UUID a source names as UUID=... or uuid=... (nullopt: a device list). The lower
// case is for /etc/fstab and mount(8): they look an upper-case UUID= up with libblkid,
// which knows no stripefs members, while uuid= reaches the daemon as it is.
std::optional<std::string> source_array_uuid(const std::vector<std::string>& sources);

// The block devices (from /proc/partitions) that carry a member superblock of the array
// `uuid`: how UUID=... sources find their members.
Result<std::vector<std::string>> find_array_members(const std::string& uuid);

}  // namespace stripefs
