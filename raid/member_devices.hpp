// Opening an array's member devices (and its journal device) for the executables: each
// locked with flock, then opened with the backend that fits it (open_member): persistent
// memory through libpmem2 (PmemMember), anything else as a FileMember with the default
// InMemory::automatic (block devices and files on disk through io_uring, member files on
// tmpfs inline: file_member.hpp).
#pragma once
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>
#include "raid/file_member.hpp"
#include "raid/io_engine.hpp"

namespace stripefs {

// How the programs drive a device (mkfs.stripefs --backend, the mount option backend=).
//  - automatic: persistent memory (a DAX character device such as /dev/dax0.0, or a file
//    that statx reports as DAX: one on a filesystem mounted with -o dax over /dev/pmem*)
//    through libpmem2; everything else as `block`.
//  - block: a FileMember (io_uring with O_DIRECT; tmpfs files inline).
//  - pmem: libpmem2 for every device, also an ordinary file (mapped through the page cache,
//    made durable with msync), which is how the backend is tested without pmem. A block
//    device is refused: Linux maps raw block devices through the page cache only (DAX on
//    them went in 4.13), so /dev/pmemN is used raw through `block`, or through a DAX
//    filesystem's files.
enum class MemberBackend : uint8_t { automatic, block, pmem };
// "auto", "block" or "pmem"; anything else is an error that names it.
Result<MemberBackend> parse_member_backend(std::string_view text);
std::string_view to_string(MemberBackend backend);
// What drives `member`, for people (status): "pmem", "block" (a block device through the
// ring), "file" (a file through the ring), "inline" (a tmpfs file), or "other".
std::string_view member_backend_name(const Member& member);

// Opens `path` with `backend` (not locked; open_device and open_devices lock). `engine`
// must outlive the member.
Result<std::unique_ptr<Member>> open_member(const std::string& path, IoEngine& engine,
                                            MemberBackend backend);

// A device opened on its own, as open_devices opens each: flock()ed, then open_member.
struct OpenedDevice {
  std::unique_ptr<Member> member;
  int lock = -1;  // the flock()ed descriptor, closed with the device
  OpenedDevice() = default;
  OpenedDevice(OpenedDevice&& other) noexcept;
  OpenedDevice& operator=(OpenedDevice&& other) noexcept;
  ~OpenedDevice();
};

struct Devices {
  std::unique_ptr<IoEngine> engine;
  MemberBackend backend = MemberBackend::automatic;  // as opened; devices added later too
  std::vector<std::unique_ptr<Member>> members;
  std::unique_ptr<Member> journal;  // the stripe journal's device, when there is one
  std::vector<int> locks;           // flock()ed descriptors, one per device
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
Result<OpenedDevice> open_device(const std::string& path, IoEngine& engine,
                                 MemberBackend backend = MemberBackend::automatic);

// Device arguments as users write them: several paths, or one joined by ':' (the form
// /etc/fstab and mount.fuse3 pass as the source).
std::vector<std::string> split_device_list(const std::vector<std::string>& args);

// Opens every path exclusively: a device another stripefs process holds is refused, so two
// daemons never drive one array (after waiting as lock_device does). `journal` may be empty.
// `backend` applies to every device, the journal's too.
Result<std::unique_ptr<Devices>> open_devices(const std::vector<std::string>& paths,
                                              const std::string& journal,
                                              MemberBackend backend = MemberBackend::automatic,
                                              std::chrono::milliseconds wait = kReleaseWait);

// The array UUID a source names as UUID=... or uuid=... (nullopt: a device list). The lower
// case is for /etc/fstab and mount(8): they look an upper-case UUID= up with libblkid,
// which knows no stripefs members, while uuid= reaches the daemon as it is.
std::optional<std::string> source_array_uuid(const std::vector<std::string>& sources);

// The block devices (from /proc/partitions) that carry a member superblock of the array
// `uuid`: how UUID=... sources find their members.
Result<std::vector<std::string>> find_array_members(const std::string& uuid);

}  // namespace stripefs
