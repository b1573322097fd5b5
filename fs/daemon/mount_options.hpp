// The stripefs command line: the daemon's own options (from -o, as mount(8), mount.fuse3
// and fstab pass them, and its flags), parsed with libfuse's option parser as mount.fuse3
// expects, and checked. What FUSE itself must see (its own options, and ro and debug, which
// both need) stays in the arguments for fuse_session_new.
#pragma once

#define FUSE_USE_VERSION 312  // as fuse_ops.hpp
#include <fuse_lowlevel.h>

#include <cstdint>
#include <string>
#include <vector>

#include "fs/core/filesystem.hpp"
#include "raid/member_devices.hpp"
#include "raid/result.hpp"

namespace stripefs::fs {

struct MountOptions {
  std::vector<std::string> sources;  // member devices, ':'-joined or apart; or one UUID=...
  std::string mountpoint;
  std::string journal_device;                        // journal_device=PATH
  MemberBackend backend = MemberBackend::automatic;  // backend=auto|block|pmem
  bool log_partial_stripes = true;                   // write_hole=closed (true) or open
  bool killpriv_v2 = true;                           // killpriv=v2 (true) or v1
  FsOptions fs;                   // ro, writeback_delay, commit_interval, cache_size
  uint64_t readahead = 4u << 20;  // readahead=SIZE; 0 keeps the kernel's
  unsigned io_threads = 0;        // io_threads=N; 0: default_io_threads()
  bool writeback_cache = false;
  bool direct_io = false;
  bool posix_acl = true;  // acl (default) or noacl: POSIX ACLs enforced by the kernel
  bool force = false;
  uint64_t speed_limit_min = 16u << 20;  // speed_limit_min=SIZE: rebuild rate with user I/O
  uint64_t speed_limit_max = 0;          // speed_limit_max=SIZE: rebuild rate idle; 0 no limit
  std::string event_program;             // event_program=PATH: run on each array event
  uint32_t max_read_errors = 20;         // max_read_errors=N: corrected read errors before a member
                                         // fails (Volume::set_read_error_policy); 0 fails at once
  std::string log_level;                 // log_level=NAME; "" keeps info (debug with -d)
  bool foreground = false;               // -f (and -d)
  bool debug = false;                    // -d, -o debug
  bool single = false;                   // -s
  bool fsname_given = false;             // fsname=NAME (passed to FUSE, which takes it)
  bool subtype_given = false;            // subtype=NAME likewise
  bool help = false;                     // -h, --help: nothing else is checked
  bool version = false;                  // -V, --version: likewise
};

// Error codes of parse_mount_options: the first two are usage errors (exit 2), the last a
// value out of range (exit 1).
constexpr int kBadSyntax = EINVAL;    // what the parser refuses: "bad options: ..."
constexpr int kMissingArgs = ENOENT;  // no SOURCE or no MOUNTPOINT
constexpr int kBadValue = ERANGE;     // "cache_size=8M: not a size of at least 16M"

// Parses argv (`args`, which keeps what FUSE must see). Every message is one line that names
// the option; libfuse's own complaints come through `fuse_complaint` (what it wrote to its
// log while parsing), when given.
Result<MountOptions> parse_mount_options(fuse_args& args,
                                         std::string (*fuse_complaint)() = nullptr);

// The --help text: every option above, one line each.
const char* mount_usage();

// FUSE worker threads by default: one per CPU this process may run on, 2 to 16. Workers
// beyond the CPUs only take turns on /dev/fuse: on two cores, RAID5 on four loop devices,
// 2 workers against 4 wrote a 1 GiB file sequentially at 1,307-1,387 against 1,090-1,186
// MiB/s, and held random reads at queue depth 16 (with several reads in flight a worker
// hands its member I/O to the engine; it waits on its own ring only while it reads alone:
// local_ring.hpp).
// 8 workers had already lost to 4 on random reads. Two workers still let one request be
// served while another waits (a writer held for writeback, an fsync).
unsigned io_threads_for(unsigned cpus);
unsigned default_io_threads();  // io_threads_for(the CPUs in this process's affinity)

}  // namespace stripefs::fs
