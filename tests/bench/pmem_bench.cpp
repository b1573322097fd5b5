// stripefs-bench pmem: what flushing every write costs the pmem backend, in one run on the
// same member files. The kernel's pmem driver once measured a 20% gain from flushing each
// write that nobody explained; the backend flushes only at FLUSH and FUA (pmem_member.hpp),
// and this benchmark measures both policies instead of guessing.
#include "bench/pmem_bench.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>

#include "bench/bench_util.hpp"
#include "journal/array_bitmap.hpp"
#include "journal/array_journal.hpp"
#include "raid/aligned_buffer.hpp"
#include "raid/array.hpp"
#include "raid/pmem_member.hpp"
#include "raid/units.hpp"

namespace stripefs::bench {

namespace {

constexpr uint64_t kSequentialRequest = 1 << 20;
constexpr unsigned kSequentialDepth = 4;
constexpr unsigned kRandomDepth = 16;
constexpr uint32_t kChunk = 64 * 1024;

int fail_with(const Error& e) {
  std::fprintf(stderr, "stripefs-bench: %s\n", e.message.c_str());
  return 1;
}

// Member files dir/pmem-N, allocated for real; removed with the directory at the end.
Result<std::vector<std::string>> make_files(const PmemBenchOptions& o) {
  std::error_code ec;
  std::filesystem::create_directories(o.dir, ec);
  if (ec) return fail(ec.value(), "cannot create {}: {}", o.dir, ec.message());
  std::vector<std::string> paths;
  for (unsigned i = 0; i < o.members; ++i) {
    paths.push_back(fmt::format("{}/pmem-{}", o.dir, i));
    const int fd = ::open(paths.back().c_str(), O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) return fail(errno, "{}: {}", paths.back(), std::strerror(errno));
    const int rc = posix_fallocate(fd, 0, static_cast<off_t>(o.member_size));
    ::close(fd);
    if (rc != 0) return fail(rc, "{}: cannot allocate: {}", paths.back(), std::strerror(rc));
  }
  return paths;
}

// The members mapped at `granularity` ("" for what the files give).
struct Mapped {
  std::vector<std::unique_ptr<PmemMember>> owned;
  std::vector<Member*> members;
  bool dax = false;  // the mapping's granularity is finer than a page
};

Result<Mapped> map_members(const std::vector<std::string>& paths, const std::string& granularity) {
  // libpmem2 reads it at each pmem2_map_new.
  if (granularity.empty()) {
    unsetenv("PMEM2_FORCE_GRANULARITY");
  } else {
    setenv("PMEM2_FORCE_GRANULARITY", granularity.c_str(), 1);
  }
  Mapped out;
  for (const std::string& p : paths) {
    auto member = PmemMember::open(p);
    if (!member) return fail(member.error());
    out.dax = (*member)->limits().dax;
    out.members.push_back(member->get());
    out.owned.push_back(std::move(*member));
  }
  unsetenv("PMEM2_FORCE_GRANULARITY");
  return out;
}

struct Pass {
  double seq_mibs = 0;
  double rand_iops = 0;
  double persists_per_write = 0;  // over both workloads
};

Result<Pass> run_pass(Mapped& mapped, const OpenOptions& open, const PmemBenchOptions& o, bool each,
                      uint64_t seed, std::vector<AlignedBuffer>& buffers) {
  uint64_t persists = 0;
  for (auto& m : mapped.owned) {
    m->set_persist_each_write(each);
    persists -= m->persist_calls();
  }
  auto array = Array::open(mapped.members, open);
  if (!array) return fail(array.error());
  Volume& volume = (*array)->volume();
  Pass pass;
  const uint64_t sequential = std::min(o.sequential, volume.size()) / kSequentialRequest;
  Result<void> status;
  double seconds = time_it([&] {
    status = run_queued(sequential, kSequentialDepth, [&](uint64_t i, auto done) {
      volume.write({{i * kSequentialRequest, buffers[i % kSequentialDepth].span()}}, done);
    });
    if (status) status = volume.flush();
  });
  if (!status) return fail(status.error());
  pass.seq_mibs = static_cast<double>(sequential * kSequentialRequest) / seconds / (1 << 20);

  std::mt19937_64 rng(seed);
  const uint64_t blocks = volume.size() / 4096;
  std::vector<uint64_t> offsets(o.writes);
  for (auto& at : offsets) at = rng() % blocks * 4096;
  seconds = time_it([&] {
    status = run_queued(o.writes, kRandomDepth, [&](uint64_t i, auto done) {
      volume.write({{offsets[i], buffers[i % kRandomDepth].span().subspan(0, 4096)}}, done);
    });
    if (status) status = volume.flush();
  });
  if (!status) return fail(status.error());
  pass.rand_iops = static_cast<double>(o.writes) / seconds;
  if (auto c = (*array)->close(); !c) return fail(c.error());
  for (auto& m : mapped.owned) {
    persists += m->persist_calls();
    m->set_persist_each_write(false);
  }
  pass.persists_per_write =
      static_cast<double>(persists) / static_cast<double>(sequential + o.writes);
  return pass;
}

// Writes the whole volume once, in 1 MiB requests.
Result<void> fill(Mapped& mapped, const OpenOptions& open, std::vector<AlignedBuffer>& buffers) {
  auto array = Array::open(mapped.members, open);
  if (!array) return fail(array.error());
  Volume& volume = (*array)->volume();
  const uint64_t requests = volume.size() / kSequentialRequest;
  auto status = run_queued(requests, kSequentialDepth, [&](uint64_t i, auto done) {
    volume.write({{i * kSequentialRequest, buffers[i % kSequentialDepth].span()}}, done);
  });
  if (status) status = volume.flush();
  if (!status) return fail(status.error());
  return (*array)->close();
}

int run(const PmemBenchOptions& o, const std::vector<std::string>& paths) {
  std::vector<AlignedBuffer> buffers;
  for (unsigned i = 0; i < kRandomDepth; ++i) {
    buffers.push_back(AlignedBuffer(kSequentialRequest));
    std::memset(buffers.back().data(), static_cast<int>(i + 1), kSequentialRequest);
  }
  // As mkfs.stripefs makes a RAID5: bitmap and write-hole journal on the members.
  ArrayOptions create;
  create.level = RaidLevel::raid5;
  create.chunk_size = kChunk;
  create.assume_clean = true;  // fresh zeroed files
  add_bitmap(create);
  add_member_journal(create, default_member_journal_blocks(o.members, kChunk, o.member_size));
  OpenOptions open;
  use_bitmap(open);
  use_stripe_journal(open, nullptr);
  {
    auto mapped = map_members(paths, "");
    if (!mapped) return fail_with(mapped.error());
    if (auto c = create_array(mapped->members, create); !c) return fail_with(c.error());
  }
  std::printf(
      "# raid5 of %u pmem members of %s in %s (bitmap, write-hole journal on the members); "
      "%s in 1 MiB writes (depth %u) and %llu random 4 KiB writes (depth %u) per pass, each "
      "ended by a flush; %u passes, medians\n",
      o.members, format_size(o.member_size).c_str(), o.dir.c_str(),
      format_size(o.sequential).c_str(), kSequentialDepth,
      static_cast<unsigned long long>(o.writes), kRandomDepth, o.repeat);
  // "page": as the files map (msync makes them durable); "cache_line": forced, so that
  // persisting is cache-line write-backs and a fence, what ADR persistent memory does.
  for (const char* granularity : {"page", "cache_line"}) {
    auto mapped = map_members(paths, std::string(granularity) == "page" ? "" : "CACHE_LINE");
    if (!mapped) return fail_with(mapped.error());
    std::printf("# %s granularity (%s)\n", granularity,
                mapped->dax ? "finer than a page: cache-line flushes" : "a page: msync");
    std::vector<double> seq[2], rand[2], persists[2];
    // Every page of the mappings touched once first: page faults on first touch would
    // otherwise fall on whichever policy runs first.
    if (auto w = fill(*mapped, open, buffers); !w) return fail_with(w.error());
    for (unsigned pass = 0; pass < o.repeat; ++pass) {
      // Alternating, and in turn first, so that drift on a shared machine hits both alike.
      for (int turn = 0; turn < 2; ++turn) {
        const int each = (turn + pass) % 2;
        auto p = run_pass(*mapped, open, o, each != 0, pass * 2 + each, buffers);
        if (!p) return fail_with(p.error());
        seq[each].push_back(p->seq_mibs);
        rand[each].push_back(p->rand_iops);
        persists[each].push_back(p->persists_per_write);
      }
    }
    const std::string g = granularity;
    result("pmem_" + g + "_seqwrite_at_flush", median(seq[0]), "MiB/s");
    result("pmem_" + g + "_seqwrite_each_write", median(seq[1]), "MiB/s");
    result("pmem_" + g + "_seqwrite_each_write_ratio", median(seq[1]) / median(seq[0]));
    result("pmem_" + g + "_randwrite_at_flush", median(rand[0]), "IOPS");
    result("pmem_" + g + "_randwrite_each_write", median(rand[1]), "IOPS");
    result("pmem_" + g + "_randwrite_each_write_ratio", median(rand[1]) / median(rand[0]));
    result("pmem_" + g + "_persists_per_write_at_flush", median(persists[0]));
    result("pmem_" + g + "_persists_per_write_each_write", median(persists[1]));
  }
  return 0;
}

}  // namespace

int run_pmem_bench(const PmemBenchOptions& o) {
  auto paths = make_files(o);
  if (!paths) return fail_with(paths.error());
  const int rc = run(o, *paths);
  std::error_code ec;
  for (const std::string& p : *paths) std::filesystem::remove(p, ec);
  std::filesystem::remove(o.dir, ec);  // only if it is empty: never someone else's files
  return rc;
}

}  // namespace stripefs::bench
