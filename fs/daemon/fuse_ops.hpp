// The FUSE low-level operations table over a Filesystem: each operation translates one
// request into one Filesystem call and replies once; nothing is decided here. A read replies
// from the volume's completion (on io_uring members the FUSE thread goes back for the next
// request meanwhile); the daemon waits for every such reply (Filesystem::wait_reads) before
// the session goes.
#pragma once
// 312, not 34: with 34, fuse_session_loop_mt resolved to the 3.2 ABI, which silently read the
// 3.12 loop configuration as the old structure, so every request got a worker thread of its
// own (a direct 4 KiB read took 61 us; 13 us with 312).
#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include "fs/core/filesystem.hpp"

namespace stripefs::fs {

// The session's userdata: what every operation needs besides the request.
struct FuseContext {
  Filesystem* fs = nullptr;
  double attr_timeout = 1.0;
  bool writeback_cache = false;     // let the kernel cache writes (FUSE_CAP_WRITEBACK_CACHE)
  bool direct_io = false;           // bypass the kernel page cache for file data
  bool posix_acl = true;            // ask the kernel to enforce POSIX ACLs (acl, noacl)
  fuse_session* session = nullptr;  // for notifications to the kernel (libfuse 3.14 has no
                                    // fuse_req_session)
};

fuse_lowlevel_ops fuse_operations();

}  // namespace stripefs::fs
