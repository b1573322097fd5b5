#pragma once

#include <cstdint>
#include <string>

namespace stripefs::bench {

struct PmemBenchOptions {
  std::string dir = "/dev/shm/stripefs-pmem-bench";  // the member files (made and removed)
  unsigned members = 4;
  uint64_t member_size = 256ull << 20;
  uint64_t sequential = 128ull << 20;  // bytes written in 1 MiB requests per pass
  uint64_t writes = 20000;             // 4 KiB random writes per pass
  unsigned repeat = 5;
};

// RAID5 on member files driven by the pmem backend (PmemMember), configured as the daemon
// configures a new array (bitmap, write-hole journal on the members): 1 MiB sequential and
// 4 KiB random writes, each pass ended by a flush, with writes persisted only at flushes
// and FUA (the backend's design) against every write persisted at once. Both at the
// granularity the files give (page: msync) and with cache-line granularity forced
// (cache-line write-backs and a fence, as on ADR persistent memory).
int run_pmem_bench(const PmemBenchOptions& options);

}  // namespace stripefs::bench
