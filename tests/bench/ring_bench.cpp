// stripefs-bench ring: what the IoEngine's thread hand-offs cost a member read. The same 4 KiB
// random reads of one block device, at queue depth 1 (latency) and at --depth (IOPS), done
// three ways in one run:
//   pread     pread(2) with O_DIRECT on the measuring thread (queue depth 1 only),
//   own_ring  a private io_uring the measuring thread submits to and reaps itself: the cost
//             of the kernel's path alone, no other thread involved,
//   engine    FileMember::submit on the IoEngine, as the daemon reads a member under load;
//             the measuring thread waits for the completion callback,
//   local     FileMember::submit inside a LocalRing::Reaper and Capture, as a FUSE worker
//             alone reads a member: on the thread's own ring, reaped by it (queue depth 1).
// The engine and local ways run twice: into heap buffers (every request pins its pages), and
// into buffers from the DataArena, which the rings have registered (fixed-buffer requests,
// as the daemon's file data). And 1 MiB sequential reads through the engine, both ways, with
// the process's CPU time per GiB: pinning costs per page, so it shows most there.
// The device is a loop device over a file in --dir (direct I/O off, as fs_bench's btrfs
// members; tests/mounted's LoopDevice, LOOP_CONFIGURE with autoclear), detached once the
// benchmark closes it, or an existing one given with --device, which is only read.
#include "bench/ring_bench.hpp"

#include <fcntl.h>
#include <liburing.h>
#include <sys/resource.h>
#include <unistd.h>

#include <array>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <random>
#include <tuple>

#include "bench/bench_util.hpp"
#include "mounted/loop_device.hpp"
#include "raid/aligned_buffer.hpp"
#include "raid/local_ring.hpp"

namespace stripefs::bench {

namespace {

constexpr uint64_t kRead = 4096;
constexpr uint64_t kLarge = 1 << 20;
constexpr unsigned kLargeDepth = 4;

// User and system time of the whole process (the engine's thread included).
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

// A new file of `size` bytes in `dir`, written (not sparse: every read then copies real
// pages, as a device's would), removed on destruction; with a loop device over it
// (tests/mounted's LoopDevice, which detaches itself once the last opener closes it).
class BackedLoop {
 public:
  static Result<std::unique_ptr<BackedLoop>> create(const std::string& dir, uint64_t size) {
    std::unique_ptr<BackedLoop> made(new BackedLoop(dir + "/stripefs-ring-bench.img"));
    const int file = ::open(made->file_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (file < 0) return fail(errno, "{}: {}", made->file_, std::strerror(errno));
    made->made_file_ = true;
    AlignedBuffer chunk(1 << 20);
    std::memset(chunk.data(), 0x5a, chunk.size());
    for (uint64_t at = 0; at < size; at += chunk.size()) {
      if (::pwrite(file, chunk.data(), chunk.size(), static_cast<off_t>(at)) !=
          static_cast<ssize_t>(chunk.size())) {
        const int e = errno;
        ::close(file);
        return fail(e, "{}: writing: {}", made->file_, std::strerror(e));
      }
    }
    ::close(file);
    auto loop = test::LoopDevice::attach(made->file_);
    if (!loop) return fail(EIO, "{} (the benchmark needs root)", loop.error());
    made->loop_.emplace(std::move(*loop));
    return made;
  }
  ~BackedLoop() {
    loop_.reset();
    if (made_file_) ::unlink(file_.c_str());
  }
  std::string path() const { return loop_->path().string(); }

 private:
  explicit BackedLoop(std::string file) : file_(std::move(file)) {}
  std::string file_;
  bool made_file_ = false;
  std::optional<test::LoopDevice> loop_;
};

// The offsets of one pass: aligned 4 KiB reads anywhere in the device, the same for every way.
std::vector<uint64_t> offsets(uint64_t device_size, uint64_t count, unsigned seed) {
  std::mt19937_64 random(seed);
  std::uniform_int_distribution<uint64_t> block(0, device_size / kRead - 1);
  std::vector<uint64_t> out(count);
  for (auto& o : out) o = block(random) * kRead;
  return out;
}

Result<double> pread_pass(int fd, const std::vector<uint64_t>& at, std::byte* buffer) {
  Result<double> failed;
  const double seconds = time_it([&] {
    for (uint64_t o : at) {
      if (::pread(fd, buffer, kRead, static_cast<off_t>(o)) != static_cast<ssize_t>(kRead)) {
        failed = fail(errno, "pread at {}: {}", o, std::strerror(errno));
        return;
      }
    }
  });
  if (!failed) return failed;
  return seconds;
}

// Reads with `depth` in flight on a ring this thread submits to and reaps itself.
Result<double> own_ring_pass(io_uring& ring, int fd, const std::vector<uint64_t>& at,
                             unsigned depth, std::byte* buffers) {
  std::optional<Error> error;
  const double seconds = time_it([&] {
    size_t issued = 0, completed = 0;
    while (completed < at.size() && !error) {
      while (issued < at.size() && issued - completed < depth) {
        io_uring_sqe* sqe = io_uring_get_sqe(&ring);
        const unsigned slot = static_cast<unsigned>(issued % depth);
        io_uring_prep_read(sqe, fd, buffers + slot * kRead, kRead, at[issued]);
        ++issued;
      }
      if (const int rc = io_uring_submit_and_wait(&ring, 1); rc < 0 && rc != -EINTR) {
        error =
            Error{-rc, fmt::format("own ring: io_uring_submit_and_wait: {}", std::strerror(-rc))};
        return;
      }
      io_uring_cqe* cqe;
      unsigned head, seen = 0;
      io_uring_for_each_cqe(&ring, head, cqe) {
        ++seen;
        if (cqe->res != static_cast<int>(kRead) && !error) {
          error = Error{cqe->res < 0 ? -cqe->res : EIO, "own ring: a read failed"};
        }
      }
      io_uring_cq_advance(&ring, seen);
      completed += seen;
    }
  });
  if (error) return std::unexpected(*error);
  return seconds;
}

// Each read submitted in a Reaper and Capture and reaped when the Reaper ends.
Result<double> local_pass(Member& member, const std::vector<uint64_t>& at, std::byte* buffer) {
  std::optional<Error> error;
  const double seconds = time_it([&] {
    for (uint64_t o : at) {
      int64_t got = -1;
      {
        LocalRing::Reaper reaper;
        LocalRing::Capture capture;
        MemberRequest request;
        request.op = MemberOp::read;
        request.offset = o;
        request.iov.push_back({buffer, kRead});
        request.done = [&got](int64_t n) { got = n; };
        member.submit(std::move(request));
      }
      if (got != static_cast<int64_t>(kRead)) {
        error = Error{got < 0 ? static_cast<int>(-got) : EIO, "local ring: a read failed"};
        return;
      }
    }
  });
  if (error) return std::unexpected(*error);
  return seconds;
}

Result<double> engine_pass(Member& member, const std::vector<uint64_t>& at, unsigned depth,
                           std::byte* buffers, uint64_t bytes = kRead) {
  Result<void> r;
  const double seconds = time_it([&] {
    r = run_queued(at.size(), depth, [&](uint64_t i, std::function<void(Result<void>)> done) {
      MemberRequest request;
      request.op = MemberOp::read;
      request.offset = at[i];
      request.iov.push_back({buffers + (i % depth) * bytes, bytes});
      request.done = [done = std::move(done), bytes](int64_t n) {
        done(n == static_cast<int64_t>(bytes)
                 ? Result<void>()
                 : fail(n < 0 ? static_cast<int>(-n) : EIO, "engine: a read failed"));
      };
      member.submit(std::move(request));
    });
  });
  if (!r) return std::unexpected(r.error());
  return seconds;
}

}  // namespace

int run_ring_bench(const RingBenchOptions& options) {
  auto report = [](const Error& e) {
    std::fprintf(stderr, "stripefs-bench: %s\n", e.message.c_str());
    return 1;
  };
  if (options.depth == 0 || options.depth > 128) {
    std::fprintf(stderr, "stripefs-bench: --depth must be 1 to 128\n");
    return 2;
  }
  if (options.reads == 0 || options.repeat == 0) {
    std::fprintf(stderr, "stripefs-bench: --reads and --repeat must be at least 1\n");
    return 2;
  }
  std::unique_ptr<BackedLoop> loop;
  std::string path = options.device;
  if (path.empty()) {
    if (options.size < kLarge) {
      std::fprintf(stderr, "stripefs-bench: --size must be at least 1M\n");
      return 2;
    }
    auto made = BackedLoop::create(options.dir, options.size);
    if (!made) return report(made.error());
    loop = std::move(*made);
    path = loop->path();
  }
  auto engine = IoEngine::create();
  if (!engine) return report(engine.error());
  auto member = FileMember::open(path, **engine);
  if (!member) return report(member.error());
  if (!(*member)->is_block_device()) {
    std::fprintf(stderr, "stripefs-bench: %s is not a block device\n", path.c_str());
    return 2;
  }
  // The measuring thread's own descriptor: O_DIRECT, not exclusive (the member holds O_EXCL).
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  if (fd < 0) return report(Error{errno, fmt::format("{}: {}", path, std::strerror(errno))});
  io_uring ring{};
  if (int rc = io_uring_queue_init(256, &ring, 0); rc < 0) {
    ::close(fd);
    return report(Error{-rc, fmt::format("io_uring_queue_init: {}", std::strerror(-rc))});
  }
  AlignedBuffer buffers(options.depth * kRead);
  AlignedBuffer large(kLargeDepth * kLarge);
  DataArena::shared().allow(8u << 20);
  AlignedBuffer fixed = AlignedBuffer::from_arena(options.depth * kRead);
  AlignedBuffer fixed_large = AlignedBuffer::from_arena(kLargeDepth * kLarge);
  if (!fixed.in_arena() || !fixed_large.in_arena()) {
    ::close(fd);
    io_uring_queue_exit(&ring);
    return report(Error{ENOMEM, "no room in the data arena"});
  }
  const uint64_t device_size = (*member)->size();
  if (device_size < kLarge) {
    ::close(fd);
    io_uring_queue_exit(&ring);
    std::fprintf(stderr, "stripefs-bench: %s is smaller than 1 MiB\n", path.c_str());
    return 2;
  }
  std::vector<uint64_t> sequential;
  for (uint64_t o = 0; o + kLarge <= device_size; o += kLarge) sequential.push_back(o);

  std::vector<double> pread_us, own1_us, engine1_us, local1_us, ownq_iops, engineq_iops;
  std::vector<double> engine1_fixed_us, local1_fixed_us, engineq_fixed_iops;
  std::vector<double> large_mibs, large_cpu, large_fixed_mibs, large_fixed_cpu;
  const uint64_t fixed_before = (*engine)->stats().fixed_requests;
  const uint64_t local_fixed_before = LocalRing::fixed_requests();
  std::optional<Error> error;
  for (unsigned pass = 0; pass < options.repeat && !error; ++pass) {
    const auto at = offsets(device_size, options.reads, pass + 1);
    const double n = static_cast<double>(at.size());
    auto take = [&](Result<double> seconds, std::vector<double>& into, bool latency) {
      if (!seconds) {
        if (!error) error = seconds.error();
        return;
      }
      into.push_back(latency ? *seconds / n * 1e6 : n / *seconds);
    };
    take(pread_pass(fd, at, buffers.data()), pread_us, true);
    take(own_ring_pass(ring, fd, at, 1, buffers.data()), own1_us, true);
    // Heap and arena alternate which goes first, so neither always follows the same pass.
    if (pass % 2 == 0) take(engine_pass(**member, at, 1, buffers.data()), engine1_us, true);
    take(engine_pass(**member, at, 1, fixed.data()), engine1_fixed_us, true);
    if (pass % 2 == 1) take(engine_pass(**member, at, 1, buffers.data()), engine1_us, true);
    const uint64_t local_before = LocalRing::requests();
    take(local_pass(**member, at, buffers.data()), local1_us, true);
    if (!error && LocalRing::requests() - local_before != at.size()) {
      error = Error{EIO, "local ring: reads went to the engine"};
    }
    take(own_ring_pass(ring, fd, at, options.depth, buffers.data()), ownq_iops, false);
    take(engine_pass(**member, at, options.depth, buffers.data()), engineq_iops, false);
    take(local_pass(**member, at, fixed.data()), local1_fixed_us, true);
    take(engine_pass(**member, at, options.depth, fixed.data()), engineq_fixed_iops, false);
    // 1 MiB reads of the whole device, heap and arena (alternating which goes first):
    // throughput and CPU per GiB.
    using Way = std::tuple<std::vector<double>*, std::vector<double>*, std::byte*>;
    std::array<Way, 2> ways{Way{&large_mibs, &large_cpu, large.data()},
                            Way{&large_fixed_mibs, &large_fixed_cpu, fixed_large.data()}};
    if (pass % 2 == 1) std::swap(ways[0], ways[1]);
    for (auto [into, cpu, base] : ways) {
      const double cpu_start = cpu_seconds();
      auto seconds = engine_pass(**member, sequential, kLargeDepth, base, kLarge);
      const double gib = static_cast<double>(sequential.size() * kLarge) / (1u << 30);
      if (!seconds) {
        if (!error) error = seconds.error();
        break;
      }
      into->push_back(gib * 1024 / *seconds);
      cpu->push_back((cpu_seconds() - cpu_start) / gib);
    }
  }
  const uint64_t fixed_requests = (*engine)->stats().fixed_requests - fixed_before;
  const uint64_t local_fixed = LocalRing::fixed_requests() - local_fixed_before;
  io_uring_queue_exit(&ring);
  ::close(fd);
  if (error) return report(*error);

  const std::string qd = "qd" + std::to_string(options.depth);
  result("ring_pread_4k_qd1", median(pread_us), "us");
  result("ring_own_ring_4k_qd1", median(own1_us), "us");
  result("ring_engine_4k_qd1", median(engine1_us), "us");
  result("ring_engine_vs_own_ring_qd1_latency", median(engine1_us) / median(own1_us), "x");
  result("ring_local_4k_qd1", median(local1_us), "us");
  result("ring_local_vs_own_ring_qd1_latency", median(local1_us) / median(own1_us), "x");
  result("ring_own_ring_4k_" + qd, median(ownq_iops), "IOPS");
  result("ring_engine_4k_" + qd, median(engineq_iops), "IOPS");
  result("ring_engine_vs_own_ring_" + qd, median(engineq_iops) / median(ownq_iops), "x");
  result("ring_engine_fixed_4k_qd1", median(engine1_fixed_us), "us");
  result("ring_engine_fixed_vs_heap_qd1_latency", median(engine1_fixed_us) / median(engine1_us),
         "x");
  result("ring_local_fixed_4k_qd1", median(local1_fixed_us), "us");
  result("ring_local_fixed_vs_heap_qd1_latency", median(local1_fixed_us) / median(local1_us), "x");
  result("ring_engine_fixed_4k_" + qd, median(engineq_fixed_iops), "IOPS");
  result("ring_engine_fixed_vs_heap_" + qd, median(engineq_fixed_iops) / median(engineq_iops), "x");
  result("ring_engine_1m_qd4", median(large_mibs), "MiB/s");
  result("ring_engine_fixed_1m_qd4", median(large_fixed_mibs), "MiB/s");
  result("ring_engine_1m_cpu", median(large_cpu), "s/GiB");
  result("ring_engine_fixed_1m_cpu", median(large_fixed_cpu), "s/GiB");
  result("ring_engine_fixed_vs_heap_1m_cpu", median(large_fixed_cpu) / median(large_cpu), "x");
  // Every request on arena buffers must have gone out fixed, or the figures compare nothing.
  const uint64_t expected = options.repeat * (options.reads * 3 + sequential.size());
  result("ring_fixed_requests", static_cast<double>(fixed_requests + local_fixed));
  if (fixed_requests + local_fixed < expected) {
    std::fprintf(stderr, "stripefs-bench: %llu fixed-buffer requests, expected %llu\n",
                 static_cast<unsigned long long>(fixed_requests + local_fixed),
                 static_cast<unsigned long long>(expected));
    return 1;
  }
  const IoEngineStats stats = (*engine)->stats();
  result("ring_engine_requests_per_submit",
         stats.submit_calls
             ? static_cast<double>(stats.requests) / static_cast<double>(stats.submit_calls)
             : 0.0);
  return 0;
}

}  // namespace stripefs::bench
