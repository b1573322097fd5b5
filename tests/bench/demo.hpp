#pragma once

#include <cstdint>
#include <string>

namespace stripefs::bench {

struct DemoOptions {
  std::string dir;
  std::string level = "5";
  unsigned members = 4;
  uint64_t member_size = 64ull << 20;
};

// Creates an array on member files in dir, exercises it (full and partial stripes, a member
// failure, degraded reads, re-assembly from the superblocks) and checks every step. Returns
// the exit code: 0 when every check passed.
int run_demo(const DemoOptions& options);

}  // namespace stripefs::bench
