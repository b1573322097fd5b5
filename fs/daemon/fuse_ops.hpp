// The FUSE low-level operations table over a Filesystem.
#pragma once
#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include "fs/core/filesystem.hpp"

namespace stripefs::fs {

// The session's userdata: what every operation needs besides the request.
struct FuseContext {
  Filesystem* fs = nullptr;
  double attr_timeout = 1.0;
  bool writeback_cache = false;  // let the kernel cache writes (FUSE_CAP_WRITEBACK_CACHE)
  bool direct_io = false;        // bypass the kernel page cache for file data
};

fuse_lowlevel_ops fuse_operations();

}  // namespace stripefs::fs
