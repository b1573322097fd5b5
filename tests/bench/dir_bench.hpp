// stripefs-bench dir: name lookup in a directory of 1,000 names against one of 1,000,000.
#pragma once
#include <cstdint>
#include <string>

namespace stripefs::bench {

struct DirBenchOptions {
  uint64_t small = 1000;
  uint64_t large = 1000000;
  uint64_t lookups = 200000;
  unsigned repeat = 5;
};

int run_dir_bench(const DirBenchOptions& options);

}  // namespace stripefs::bench
