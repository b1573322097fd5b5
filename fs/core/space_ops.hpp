// The space operations of the filesystem (truncate, fallocate, punch hole, zero range,
// lseek, copy_file_range) are Filesystem members in space_ops.cpp; this is the part that
// needs nothing but a file's cache and block map.
#pragma once

#include <cstdint>

#include "fs/core/extent_map.hpp"
#include "fs/core/file_cache.hpp"
#include "raid/result.hpp"

namespace stripefs::fs {

// lseek's SEEK_DATA and SEEK_HOLE (`whence`) from `offset` in a file of `size` bytes. Data is
// what the cache holds and what written (or pending) extents map; holes and unwritten
// extents read as zeros. The end of the file is a hole. ENXIO at or past the end, and for
// SEEK_DATA with no data after `offset`.
Result<uint64_t> seek_data_or_hole(const FileCache& cache, const ExtentMap& extents, uint64_t size,
                                   uint64_t offset, int whence);

}  // namespace stripefs::fs
