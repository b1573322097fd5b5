// stripefs-bench read: what a 4 KiB random read costs the filesystem itself (no FUSE, no
// kernel: the daemon's part of a read), with data checksums on and off, of a file written
// once and of the same file after random rewrites have scattered it.
#pragma once
#include <cstdint>

namespace stripefs::bench {

struct ReadBenchOptions {
  uint64_t size = 512ull << 20;  // the file
  uint64_t rewrites = 0;         // random 4 KiB rewrites that scatter it (0: size / 8 KiB)
  uint64_t reads = 200000;       // random 4 KiB reads per pass
  unsigned repeat = 5;
};

int run_read_bench(const ReadBenchOptions& options);

}  // namespace stripefs::bench
