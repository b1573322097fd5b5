// Builds a filesystem on a RAID5 Volume of memory members (no FUSE, no kernel: the member
// reads are copies), writes one file sequentially, and times random 4 KiB reads of it on one
// thread after a remount (the file cache empty, so every read is planned from the extents,
// read from the volume and, with checksums, checked). Then rewrites random blocks of it,
// remounts, and times the same reads again: under copy on write (checksummed files) the file
// now holds an extent per rewritten block; without checksums it is overwritten in place. The
// same steps run on a filesystem without data checksums, and the ratios of reads per second
// say what the checksums cost the filesystem's own part of a read, without the noise of
// FUSE's and the scheduler's hand-offs.
#include "bench/read_bench.hpp"

#include <sys/stat.h>

#include <cstring>
#include <random>

#include "bench/bench_util.hpp"
#include "fs/core/filesystem.hpp"
#include "fs/core/make_fs.hpp"
#include "raid/memory_member.hpp"
#include "raid/units.hpp"

namespace stripefs::bench {

namespace {

constexpr uint64_t kBlock = fs::kBlockSize;
constexpr uint64_t kChunk = 64 * 1024;
constexpr unsigned kMembers = 4;

[[noreturn]] void die(const std::string& what, const Error& e) {
  std::fprintf(stderr, "stripefs-bench: %s: %s\n", what.c_str(), e.message.c_str());
  std::exit(1);
}

// One RAID5 volume of memory members holding a filesystem with one file, whose blocks each
// begin with a tag this program knows (so that every read is checked for the right bytes).
class Subject {
 public:
  Subject(uint64_t file_size, bool checksums) : blocks_(file_size / kBlock), tags_(blocks_) {
    // Room for the file, a copy of every block (copy on write), and the metadata.
    const uint64_t member_size = (file_size * 2 / (kMembers - 1) + (64 << 20)) / kChunk * kChunk;
    std::vector<Member*> members;
    for (unsigned i = 0; i < kMembers; ++i) {
      media_.push_back(std::make_unique<MemoryMember>("mem" + std::to_string(i), member_size));
      members.push_back(media_.back().get());
    }
    auto geometry = Geometry::create(RaidLevel::raid5, kMembers, kChunk, member_size);
    if (!geometry) die("geometry", geometry.error());
    auto volume = Volume::create(*geometry, members, 0);
    if (!volume) die("volume", volume.error());
    volume_ = std::move(*volume);
    fs::MakeFsOptions make;
    make.checksums = checksums;
    make.inode_count = 1024;
    if (auto made = fs::make_filesystem(*volume_, make); !made) die("mkfs", made.error());
    mount();
    auto file = fs_->mknod(fs::kRootInode, "file", S_IFREG | 0644, 0, fs::Caller{0, 0});
    if (!file) die("create", file.error());
    ino_ = file->ino;
    std::vector<std::byte> piece(1 << 20);
    for (uint64_t at = 0; at < file_size; at += piece.size()) {
      const uint64_t n = std::min<uint64_t>(piece.size(), file_size - at);
      for (uint64_t b = 0; b < n / kBlock; ++b) tag(piece.data() + b * kBlock, at / kBlock + b);
      write(at, {piece.data(), n});
    }
    remount();
  }

  // `count` random blocks rewritten (each with a new tag), then a remount.
  void rewrite(uint64_t count, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<std::byte> block(kBlock);
    for (uint64_t i = 0; i < count; ++i) {
      const uint64_t b = rng() % blocks_;
      ++tags_[b];
      tag(block.data(), b);
      write(b * kBlock, block);
    }
    remount();
  }

  // Microseconds per read: median over `repeat` passes of `count` random 4 KiB reads, after
  // one pass that is not timed (the extents and checksum table blocks it needs are loaded).
  double time_reads(uint64_t count, unsigned repeat, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<uint64_t> at(count);
    std::vector<double> passes;
    for (unsigned r = 0; r <= repeat; ++r) {
      for (auto& b : at) b = rng() % blocks_;
      const double seconds = time_it([&] {
        for (const uint64_t b : at) {
          auto reply = fs_->read(ino_, b * kBlock, kBlock);
          if (!reply) die("read", reply.error());
          uint64_t got;
          if (reply->size() != kBlock || reply->fragments.front().size() < sizeof got) {
            die("read", Error{EIO, "short read"});
          }
          std::memcpy(&got, reply->fragments.front().data(), sizeof got);
          if (got != expected(b)) die("read", Error{EIO, fmt::format("block {}: wrong bytes", b)});
        }
      });
      if (r > 0) passes.push_back(seconds * 1e6 / static_cast<double>(count));
    }
    return median(passes);
  }

  ~Subject() {
    if (fs_) (void)fs_->unmount();
  }

 private:
  uint64_t expected(uint64_t b) const { return b << 20 | tags_[b]; }
  void tag(std::byte* block, uint64_t b) const {
    const uint64_t t = expected(b);
    std::memcpy(block, &t, sizeof t);
  }
  void write(uint64_t offset, std::span<const std::byte> data) {
    auto w = fs_->write(ino_, offset, data.size(), [&](std::span<std::byte> dest) -> Result<void> {
      std::memcpy(dest.data(), data.data(), dest.size());
      return {};
    });
    if (!w) die("write", w.error());
  }
  void mount() {
    auto mounted = fs::Filesystem::mount(*volume_, {});
    if (!mounted) die("mount", mounted.error());
    fs_ = std::move(*mounted);
  }
  void remount() {
    if (auto r = fs_->fsync(ino_, false); !r) die("fsync", r.error());
    if (auto r = fs_->unmount(); !r) die("unmount", r.error());
    fs_.reset();
    mount();
  }

  const uint64_t blocks_;
  std::vector<uint64_t> tags_;  // per block: how often it was rewritten
  std::vector<std::unique_ptr<MemoryMember>> media_;
  std::unique_ptr<Volume> volume_;
  std::unique_ptr<fs::Filesystem> fs_;
  uint64_t ino_ = 0;
};

}  // namespace

int run_read_bench(const ReadBenchOptions& o) {
  if (o.size < 16 * kBlock || o.size % kBlock != 0 || o.reads == 0 || o.repeat == 0) {
    std::fprintf(stderr,
                 "stripefs-bench: --size must be a multiple of 4K of at least 64K, and --reads "
                 "and --repeat more than 0\n");
    return 2;
  }
  const uint64_t rewrites = o.rewrites != 0 ? o.rewrites : o.size / (2 * kBlock);
  double fresh[2], scattered[2];  // [checksums off, on]: microseconds per read
  for (const bool checksums : {false, true}) {
    Subject subject(o.size, checksums);
    fresh[checksums] = subject.time_reads(o.reads, o.repeat, 1);
    subject.rewrite(rewrites, 2);
    scattered[checksums] = subject.time_reads(o.reads, o.repeat, 3);
  }
  result("read.file_size", static_cast<double>(o.size) / (1 << 20), "MiB");
  result("read.rewrites", static_cast<double>(rewrites));
  result("read.fresh_nocsum", fresh[0], "us");
  result("read.fresh_csum", fresh[1], "us");
  result("read.scattered_nocsum", scattered[0], "us");
  result("read.scattered_csum", scattered[1], "us");
  // Reads per second, checksums on against off (the goal is at least 0.9).
  result("read.fresh_csum_vs_nocsum", fresh[0] / fresh[1], "ratio");
  result("read.scattered_csum_vs_nocsum", scattered[0] / scattered[1], "ratio");
  return 0;
}

}  // namespace stripefs::bench
