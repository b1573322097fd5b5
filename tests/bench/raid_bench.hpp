#pragma once

#include <cstdint>
#include <string>

namespace stripefs::bench {

struct RaidBenchOptions {
  std::string level = "5";
  unsigned members = 4;
  std::string dir;
  uint64_t member_size = 256ull << 20;
  uint32_t chunk = 64 * 1024;
  uint64_t request_size = 4ull << 20;
  unsigned depth = 4;
  unsigned repeat = 5;
};

// Returns the process exit code.
int run_raid_bench(const RaidBenchOptions& options);

}  // namespace stripefs::bench
