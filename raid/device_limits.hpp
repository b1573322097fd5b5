// What a member device can do, as discovered from sysfs/statx or set by a test.
#pragma once

#include <cstdint>
#include <string>

namespace stripefs {

struct DeviceLimits {
  uint32_t logical_block = 512;    // smallest addressable unit; O_DIRECT alignment
  uint32_t physical_block = 4096;  // smaller writes make the device read-modify-write
  uint32_t minimum_io = 4096;      // preferred minimum request size
  uint32_t optimal_io = 0;         // preferred request size for streaming (0 = not reported)
  uint32_t max_io = 1u << 20;      // largest single request (max_sectors_kb)
  bool rotational = false;
  bool dax = false;
  bool volatile_cache = true;  // needs flushes (or FUA) for durability
};

// The size to align and merge streaming I/O to: optimal_io when reported, else the
// physical block size.
inline uint32_t preferred_io_size(const DeviceLimits& limits) {
  return limits.optimal_io != 0 ? limits.optimal_io : limits.physical_block;
}

}  // namespace stripefs
