#pragma once

#include <cstdint>
#include <string>

#include "raid/geometry.hpp"

namespace stripefs::bench {

struct RebuildBenchOptions {
  std::string dir;
  RaidLevel level = RaidLevel::raid5;  // one with redundancy
  unsigned members = 4;
  uint64_t member_size = 512ull << 20;
  uint32_t chunk = 64 * 1024;
  uint64_t limit = 32ull << 20;  // the rate-limited rebuild's speed (min = max), per second
  double seconds = 3;            // each timed phase of user I/O
  unsigned repeat = 3;
  // Bytes per second of each member modeled as a device (ModeledDevice); 0: the files as
  // they are.
  uint64_t device_rate = 0;
  // Member files on tmpfs driven inline, on the submitting thread, as the daemon drives them
  // (file_member.hpp); otherwise through the ring, as a device would be.
  bool inline_members = false;
};

int run_rebuild_bench(const RebuildBenchOptions& options);

}  // namespace stripefs::bench
