// stripefs-bench: the project's benchmarks. Each prints "RESULT name value unit" lines.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <initializer_list>
#include <string>
#include <utility>

#include "bench/bitmap_bench.hpp"
#include "bench/demo.hpp"
#include "bench/dir_bench.hpp"
#include "bench/pmem_bench.hpp"
#include "bench/raid_bench.hpp"
#include "bench/read_bench.hpp"
#include "bench/rebuild_bench.hpp"
#include "bench/ring_bench.hpp"
#include "raid/units.hpp"

namespace {

// Reads each option text (64K, 1G, ...) into its target; false, after one line naming the
// bad one, on the first that is not a size.
bool parse_sizes(std::initializer_list<std::pair<const std::string*, uint64_t*>> sizes) {
  for (auto [text, target] : sizes) {
    auto parsed = stripefs::parse_size(*text);
    if (!parsed) {
      std::fprintf(stderr, "stripefs-bench: %s\n", parsed.error().message.c_str());
      return false;
    }
    *target = *parsed;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"stripefs benchmarks; each figure is printed as 'RESULT name value unit'"};
  app.require_subcommand(1);
  spdlog::set_level(spdlog::level::warn);

  stripefs::bench::RaidBenchOptions raid;
  auto* raid_cmd = app.add_subcommand(
      "raid", "full-stripe sequential write/read of a Volume vs the same member I/O done directly");
  raid_cmd->add_option("--level", raid.level, "RAID level: 0, 1, 10, 5 or 6")->required();
  raid_cmd->add_option("--members", raid.members, "number of member files")->required();
  raid_cmd->add_option("--dir", raid.dir, "directory for the member files (tmpfs in practice)")
      ->required();
  std::string member_size = "256M", chunk = "64K", request = "4M";
  raid_cmd->add_option("--size", member_size, "size of each member file (default 256M)");
  raid_cmd->add_option("--chunk", chunk, "chunk size (default 64K)");
  raid_cmd->add_option("--request", request, "bytes per Volume request (default 4M)");
  raid_cmd->add_option("--depth", raid.depth, "requests in flight (default 4)");
  raid_cmd->add_option("--repeat", raid.repeat, "passes; figures are medians (default 5)");

  stripefs::bench::BitmapBenchOptions bitmap;
  auto* bitmap_cmd = app.add_subcommand(
      "bitmap",
      "4 KiB random writes with the write-intent bitmap on vs off, and resync after a "
      "crash with 1% of regions dirty vs a full resync (RAID5)");
  bitmap_cmd->add_option("--dir", bitmap.dir, "directory for the member files (tmpfs)")->required();
  bitmap_cmd->add_option("--members", bitmap.members, "number of members (default 4)");
  std::string bitmap_size = "512M", bitmap_region = "512K", bitmap_set = "64M";
  bitmap_cmd->add_option("--size", bitmap_size, "size of each member file (default 512M)");
  bitmap_cmd->add_option("--region", bitmap_region, "bitmap region size (default 512K)");
  bitmap_cmd->add_option("--working-set", bitmap_set, "random writes stay in here (default 64M)");
  bitmap_cmd->add_option("--writes", bitmap.writes, "random writes per pass (default 20000)");
  bitmap_cmd->add_option("--depth", bitmap.depth, "writes in flight (default 16)");
  bitmap_cmd->add_option("--repeat", bitmap.repeat, "passes; figures are medians (default 5)");

  stripefs::bench::DirBenchOptions dir;
  auto* dir_cmd = app.add_subcommand(
      "dir", "name lookups in a directory of 1,000 names vs one of 1,000,000 (no FUSE)");
  dir_cmd->add_option("--small", dir.small, "names in the small directory (default 1000)");
  dir_cmd->add_option("--large", dir.large, "names in the large directory (default 1000000)");
  dir_cmd->add_option("--lookups", dir.lookups, "lookups per pass (default 200000)");
  dir_cmd->add_option("--repeat", dir.repeat, "passes; figures are medians (default 5)");

  stripefs::bench::ReadBenchOptions read;
  auto* read_cmd = app.add_subcommand(
      "read",
      "random 4 KiB reads of one file through the filesystem (no FUSE), data checksums on vs "
      "off, written once and after random rewrites (copy on write scatters it)");
  std::string read_size = "512M";
  read_cmd->add_option("--size", read_size, "size of the file (default 512M)");
  read_cmd->add_option("--rewrites", read.rewrites,
                       "random 4 KiB rewrites that scatter it (default: size / 8K)");
  read_cmd->add_option("--reads", read.reads, "reads per pass (default 200000)");
  read_cmd->add_option("--repeat", read.repeat, "passes; figures are medians (default 5)");

  stripefs::bench::RebuildBenchOptions rebuild;
  auto* rebuild_cmd = app.add_subcommand(
      "rebuild",
      "rebuild of a failed member onto a new device vs a direct sequential read of one member, "
      "and the share of user writes kept beside a rate-limited rebuild");
  rebuild_cmd->add_option("--dir", rebuild.dir, "directory for the member files (tmpfs)")
      ->required();
  std::string rebuild_level = "5";
  rebuild_cmd->add_option("--level", rebuild_level, "RAID level: 1, 10, 5 or 6 (default 5)");
  rebuild_cmd->add_option("--members", rebuild.members, "number of members (default 4)");
  std::string rebuild_size = "512M", rebuild_chunk = "64K", rebuild_limit = "32M";
  rebuild_cmd->add_option("--size", rebuild_size, "size of each member file (default 512M)");
  rebuild_cmd->add_option("--chunk", rebuild_chunk, "chunk size (default 64K)");
  rebuild_cmd->add_option("--limit", rebuild_limit,
                          "the rate-limited rebuild's speed per second (default 32M)");
  rebuild_cmd->add_option("--seconds", rebuild.seconds,
                          "length of each timed phase of user writes (default 3)");
  rebuild_cmd->add_option("--repeat", rebuild.repeat, "passes; figures are medians (default 3)");
  std::string rebuild_device_rate = "0";
  rebuild_cmd->add_option("--device-rate", rebuild_device_rate,
                          "serve each member file as an independent device of this bandwidth "
                          "per second, e.g. 200M (default 0: as fast as the files go)");
  rebuild_cmd->add_flag("--inline", rebuild.inline_members,
                        "drive member files on tmpfs inline, on the submitting thread, as the "
                        "daemon does (default: through io_uring, as a device is driven)");

  stripefs::bench::RingBenchOptions ring;
  auto* ring_cmd = app.add_subcommand(
      "ring",
      "4 KiB random reads of a loop device through the IoEngine vs the measuring thread's own "
      "pread and io_uring: what the engine's thread hand-offs cost; and heap against "
      "registered (fixed) buffers, 4 KiB and 1 MiB reads (needs root)");
  ring_cmd->add_option("--dir", ring.dir,
                       "directory for the loop device's backing file (default /dev/shm)");
  ring_cmd->add_option("--device", ring.device,
                       "read this block device instead of making a loop device (only read)");
  std::string ring_size = "256M";
  ring_cmd->add_option("--size", ring_size, "size of the backing file (default 256M, at least 1M)");
  ring_cmd->add_option("--reads", ring.reads, "reads per pass and way (default 20000)");
  ring_cmd->add_option("--depth", ring.depth, "reads in flight for the IOPS figures (default 16)");
  ring_cmd->add_option("--repeat", ring.repeat, "passes; figures are medians (default 5)");

  stripefs::bench::PmemBenchOptions pmem;
  auto* pmem_cmd = app.add_subcommand(
      "pmem",
      "RAID5 on pmem-backend member files: sequential and random writes with writes persisted "
      "at flushes only (the backend's design) vs every write persisted at once");
  pmem_cmd->add_option("--dir", pmem.dir,
                       "directory for the member files, made and removed (default "
                       "/dev/shm/stripefs-pmem-bench)");
  pmem_cmd->add_option("--members", pmem.members, "number of members (default 4)");
  std::string pmem_size = "256M", pmem_sequential = "128M";
  pmem_cmd->add_option("--size", pmem_size, "size of each member file (default 256M)");
  pmem_cmd->add_option("--sequential", pmem_sequential,
                       "bytes written in 1 MiB requests per pass (default 128M)");
  pmem_cmd->add_option("--writes", pmem.writes, "random 4 KiB writes per pass (default 20000)");
  pmem_cmd->add_option("--repeat", pmem.repeat, "passes; figures are medians (default 5)");

  stripefs::bench::DemoOptions demo;
  auto* demo_cmd = app.add_subcommand(
      "demo", "create an array on member files, exercise it and check every step");
  demo_cmd->add_option("--dir", demo.dir, "directory for the member files")->required();
  demo_cmd->add_option("--level", demo.level, "RAID level (default 5)");
  demo_cmd->add_option("--members", demo.members, "number of members (default 4)");
  std::string demo_size = "64M";
  demo_cmd->add_option("--size", demo_size, "size of each member file (default 64M)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Help is success; every usage error exits 2, with CLI11's one-line message.
    return app.exit(e) == 0 ? 0 : 2;
  }

  if (dir_cmd->parsed()) return stripefs::bench::run_dir_bench(dir);
  if (read_cmd->parsed()) {
    if (!parse_sizes({{&read_size, &read.size}})) return 2;
    return stripefs::bench::run_read_bench(read);
  }
  if (raid_cmd->parsed()) {
    uint64_t chunk_bytes = 0;
    if (!parse_sizes({std::pair{&member_size, &raid.member_size},
                      std::pair{&request, &raid.request_size}, std::pair{&chunk, &chunk_bytes}}))
      return 2;
    if (chunk_bytes > UINT32_MAX) {
      std::fprintf(stderr, "stripefs-bench: chunk size %s is too large\n", chunk.c_str());
      return 2;
    }
    raid.chunk = static_cast<uint32_t>(chunk_bytes);
    if (raid.depth == 0 || raid.repeat == 0) {
      std::fprintf(stderr, "stripefs-bench: --depth and --repeat must be at least 1\n");
      return 2;
    }
    return stripefs::bench::run_raid_bench(raid);
  }
  if (bitmap_cmd->parsed()) {
    if (!parse_sizes({std::pair{&bitmap_size, &bitmap.member_size},
                      std::pair{&bitmap_region, &bitmap.region_size},
                      std::pair{&bitmap_set, &bitmap.working_set}}))
      return 2;
    if (bitmap.members < 3 || bitmap.depth == 0 || bitmap.repeat == 0 || bitmap.writes == 0 ||
        bitmap.member_size < (16u << 20) || bitmap.working_set < 4096 ||
        bitmap.region_size < 64 * 1024) {
      std::fprintf(stderr,
                   "stripefs-bench: bitmap needs --members >= 3, --size >= 16M, --working-set "
                   ">= 4K, --region >= 64K (the chunk size) and non-zero --depth, --repeat and "
                   "--writes\n");
      return 2;
    }
    return stripefs::bench::run_bitmap_bench(bitmap);
  }
  if (rebuild_cmd->parsed()) {
    uint64_t chunk_bytes = 0;
    if (!parse_sizes({std::pair{&rebuild_size, &rebuild.member_size},
                      std::pair{&rebuild_chunk, &chunk_bytes},
                      std::pair{&rebuild_limit, &rebuild.limit},
                      std::pair{&rebuild_device_rate, &rebuild.device_rate}}))
      return 2;
    if (chunk_bytes > (64u << 20) || rebuild.repeat == 0 || !(rebuild.seconds > 0) ||
        rebuild.limit == 0 || rebuild.member_size < (16u << 20)) {
      std::fprintf(stderr,
                   "stripefs-bench: rebuild needs --size >= 16M, --chunk <= 64M, and positive "
                   "--limit, --seconds and --repeat\n");
      return 2;
    }
    rebuild.chunk = static_cast<uint32_t>(chunk_bytes);
    auto level = stripefs::parse_raid_level(rebuild_level);
    if (!level || *level == stripefs::RaidLevel::raid0) {
      std::fprintf(stderr, "stripefs-bench: --level %s: rebuild needs 1, 10, 5 or 6\n",
                   rebuild_level.c_str());
      return 2;
    }
    rebuild.level = *level;
    return stripefs::bench::run_rebuild_bench(rebuild);
  }
  if (ring_cmd->parsed()) {
    if (!parse_sizes({{&ring_size, &ring.size}})) return 2;
    return stripefs::bench::run_ring_bench(ring);
  }
  if (pmem_cmd->parsed()) {
    if (!parse_sizes({std::pair{&pmem_size, &pmem.member_size},
                      std::pair{&pmem_sequential, &pmem.sequential}}))
      return 2;
    if (pmem.members < 3 || pmem.members > 32 || pmem.member_size < (64u << 20) ||
        pmem.sequential < (1u << 20) || pmem.writes == 0 || pmem.repeat == 0) {
      std::fprintf(stderr,
                   "stripefs-bench: pmem needs --members 3..32, --size >= 64M, --sequential "
                   ">= 1M and non-zero --writes and --repeat\n");
      return 2;
    }
    return stripefs::bench::run_pmem_bench(pmem);
  }
  if (demo_cmd->parsed()) {
    if (!parse_sizes({{&demo_size, &demo.member_size}})) return 2;
    return stripefs::bench::run_demo(demo);
  }
  return 0;
}
