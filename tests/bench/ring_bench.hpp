#pragma once

#include <cstdint>
#include <string>

namespace stripefs::bench {

struct RingBenchOptions {
  std::string dir = "/dev/shm";  // where the loop device's backing file lives
  std::string device;            // an existing block device to read instead (read only)
  uint64_t size = 256ull << 20;  // the backing file
  uint64_t reads = 20000;        // 4 KiB reads per pass and way
  unsigned depth = 16;           // requests in flight for the queued figures
  unsigned repeat = 5;
};

// 4 KiB random reads of one block device (a loop device over a file in `dir`, made and
// removed by the benchmark) through a FileMember on the IoEngine, against the same reads
// done by the measuring thread itself: pread(2) with O_DIRECT, and its own io_uring ring;
// and the engine's and a local ring's reads into heap against registered (arena) buffers,
// 4 KiB and 1 MiB.
int run_ring_bench(const RingBenchOptions& options);

}  // namespace stripefs::bench
