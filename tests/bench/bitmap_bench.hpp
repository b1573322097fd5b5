#pragma once

#include <cstdint>
#include <string>

namespace stripefs::bench {

struct BitmapBenchOptions {
  std::string dir;
  unsigned members = 4;
  uint64_t member_size = 512ull << 20;
  uint64_t region_size = 512 * 1024;
  uint64_t working_set = 64ull << 20;  // random writes stay in here, so its regions are hot
  uint64_t writes = 20000;             // 4 KiB random writes per timed pass
  unsigned depth = 16;
  unsigned repeat = 5;
};

int run_bitmap_bench(const BitmapBenchOptions& options);

}  // namespace stripefs::bench
