// Builds a filesystem on a RAID5 Volume of memory members (no FUSE: this measures the
// directory index, not the kernel), fills one directory with `small` names and another with
// `large`, and times random lookups of names that exist and of names that do not, warm and
// after a remount (every bucket read from the volume once).
#include "bench/dir_bench.hpp"

#include <sys/stat.h>

#include <random>

#include "bench/bench_util.hpp"
#include "fs/core/filesystem.hpp"
#include "fs/core/make_fs.hpp"
#include "raid/memory_member.hpp"
#include "raid/units.hpp"

namespace stripefs::bench {

namespace {

std::string name_of(uint64_t i) {
  return fmt::format("file-{:08}-of-the-big-directory", i);
}

// Microseconds per lookup: median over `repeat` passes of `count` random lookups.
double time_lookups(fs::Filesystem& fs, uint64_t dir, uint64_t entries, uint64_t count,
                    unsigned repeat, bool present, uint64_t seed) {
  std::vector<double> passes;
  std::mt19937_64 rng(seed);
  for (unsigned r = 0; r < repeat; ++r) {
    std::vector<std::string> names;
    for (uint64_t i = 0; i < count; ++i) {
      names.push_back(present ? name_of(rng() % entries) : fmt::format("absent-{}", rng()));
    }
    uint64_t found = 0;
    const double seconds = time_it([&] {
      for (const std::string& n : names) {
        auto a = fs.lookup(dir, n);
        if (a) {
          ++found;
          fs.forget(a->ino, 1);
        }
      }
    });
    if (found != (present ? count : 0)) {
      std::fprintf(stderr, "stripefs-bench: %llu of %llu lookups found their name\n",
                   static_cast<unsigned long long>(found), static_cast<unsigned long long>(count));
      return -1;
    }
    passes.push_back(seconds * 1e6 / static_cast<double>(count));
  }
  return median(passes);
}

}  // namespace

int run_dir_bench(const DirBenchOptions& o) {
  if (o.small == 0 || o.large == 0 || o.lookups == 0 || o.repeat == 0) {
    std::fprintf(stderr, "stripefs-bench: --small, --large, --lookups and --repeat must be > 0\n");
    return 2;
  }
  constexpr unsigned kMembers = 4;
  constexpr uint32_t kChunk = 64 * 1024;
  const uint64_t member_size = 512ull << 20;
  std::vector<std::unique_ptr<MemoryMember>> media;
  std::vector<Member*> members;
  for (unsigned i = 0; i < kMembers; ++i) {
    media.push_back(std::make_unique<MemoryMember>("mem" + std::to_string(i), member_size));
    members.push_back(media.back().get());
  }
  auto geometry = Geometry::create(RaidLevel::raid5, kMembers, kChunk, member_size);
  auto volume = geometry ? Volume::create(*geometry, members, 0) : fail(geometry.error());
  if (!volume) {
    std::fprintf(stderr, "stripefs-bench: %s\n", volume.error().message.c_str());
    return 1;
  }
  fs::MakeFsOptions make;
  make.inode_count = o.small + o.large + 1024;
  if (auto made = fs::make_filesystem(**volume, make); !made) {
    std::fprintf(stderr, "stripefs-bench: %s\n", made.error().message.c_str());
    return 1;
  }
  auto mounted = fs::Filesystem::mount(**volume, {});
  if (!mounted) {
    std::fprintf(stderr, "stripefs-bench: %s\n", mounted.error().message.c_str());
    return 1;
  }
  std::unique_ptr<fs::Filesystem> fs = std::move(*mounted);
  const fs::Caller root{0, 0};
  uint64_t dirs[2] = {0, 0};
  const uint64_t sizes[2] = {o.small, o.large};
  double create_seconds = 0;
  for (int d = 0; d < 2; ++d) {
    auto made = fs->mknod(fs::kRootInode, d == 0 ? "small" : "large", S_IFDIR | 0755, 0, root);
    if (!made) {
      std::fprintf(stderr, "stripefs-bench: %s\n", made.error().message.c_str());
      return 1;
    }
    dirs[d] = made->ino;
    const double seconds = time_it([&] {
      for (uint64_t i = 0; i < sizes[d]; ++i) {
        auto f = fs->mknod(dirs[d], name_of(i), S_IFREG | 0644, 0, root);
        if (!f) {
          std::fprintf(stderr, "stripefs-bench: create %llu: %s\n",
                       static_cast<unsigned long long>(i), f.error().message.c_str());
          std::exit(1);
        }
        fs->forget(f->ino, 1);
      }
    });
    if (d == 1) create_seconds = seconds;
  }
  result("entries_small", static_cast<double>(o.small));
  result("entries_large", static_cast<double>(o.large));
  result("create_large", static_cast<double>(o.large) / create_seconds, "files/s");

  const double small_hit = time_lookups(*fs, dirs[0], o.small, o.lookups, o.repeat, true, 1);
  const double large_hit = time_lookups(*fs, dirs[1], o.large, o.lookups, o.repeat, true, 2);
  const double large_miss = time_lookups(*fs, dirs[1], o.large, o.lookups, o.repeat, false, 3);
  if (small_hit < 0 || large_hit < 0 || large_miss < 0) return 1;
  result("lookup_small", small_hit, "us");
  result("lookup_large", large_hit, "us");
  result("lookup_large_absent", large_miss, "us");
  result("lookup_large_vs_small_ratio", large_hit / small_hit);

  // Cold: after a remount, each lookup may read its bucket from the volume.
  if (auto r = fs->unmount(); !r) {
    std::fprintf(stderr, "stripefs-bench: %s\n", r.error().message.c_str());
    return 1;
  }
  fs.reset();
  auto again = fs::Filesystem::mount(**volume, {});
  if (!again) {
    std::fprintf(stderr, "stripefs-bench: %s\n", again.error().message.c_str());
    return 1;
  }
  const fs::MetaStats before = (*again)->meta_stats();
  const double cold = time_lookups(**again, dirs[1], o.large, 2000, 1, true, 4);
  const fs::MetaStats after = (*again)->meta_stats();
  result("lookup_large_cold", cold, "us");
  result("blocks_read_per_cold_lookup",
         static_cast<double>(after.block_reads - before.block_reads) / 2000.0);
  (void)(*again)->unmount();
  return 0;
}

}  // namespace stripefs::bench
