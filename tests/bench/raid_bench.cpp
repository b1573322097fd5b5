// stripefs-bench raid: full-stripe sequential throughput of the Volume against writing and
// reading the very same member byte ranges directly, through the same io_uring engine and
// the same request merging, in one run.
#include "bench/raid_bench.hpp"

#include <condition_variable>
#include <cstdio>
#include <mutex>

#include "bench/bench_util.hpp"
#include "raid/aligned_buffer.hpp"
#include "raid/io_batch.hpp"
#include "raid/units.hpp"
#include "raid/volume.hpp"

namespace stripefs::bench {

namespace {

constexpr uint64_t kDataOffset = 1 << 20;

// The member I/Os of stripes [first, first+count) as the Volume issues them: for writes
// every copy and parity chunk, for reads one copy of each data chunk (spread over the
// copies as the Volume spreads them). `buffer` holds one chunk per member per stripe.
std::vector<PlannedIo> member_ranges(const Geometry& g, uint64_t first, uint64_t count, bool write,
                                     std::byte* buffer) {
  std::vector<PlannedIo> ios;
  const uint64_t chunk = g.chunk_size();
  uint64_t slot = 0;
  auto add = [&](const ChunkLocation& at) {
    ios.push_back({at.member, kDataOffset + at.member_offset, buffer + slot++ * chunk, chunk, 0});
  };
  for (uint64_t s = first; s < first + count; ++s) {
    for (unsigned d = 0; d < g.data_chunks(); ++d) {
      if (write) {
        for (unsigned c = 0; c < g.copies(); ++c) add(g.locate(s, d, c));
      } else {
        add(g.locate(s, d, static_cast<unsigned>(s % g.copies())));
      }
    }
    if (write && g.has_parity()) {
      add({g.p_member(s), s * chunk});
      if (g.parity_chunks() == 2) add({g.q_member(s), s * chunk});
    }
  }
  return ios;
}

}  // namespace

int run_raid_bench(const RaidBenchOptions& options) {
  auto level = parse_raid_level(options.level);
  if (!level) {
    std::fprintf(stderr, "stripefs-bench: %s\n", level.error().message.c_str());
    return 2;
  }
  if (options.member_size < kDataOffset + 4 * uint64_t{options.chunk}) {
    std::fprintf(stderr, "stripefs-bench: --size %llu is too small: members need at least %llu\n",
                 static_cast<unsigned long long>(options.member_size),
                 static_cast<unsigned long long>(kDataOffset + 4 * uint64_t{options.chunk}));
    return 2;
  }
  auto geometry =
      Geometry::create(*level, options.members, options.chunk, options.member_size - kDataOffset);
  if (!geometry) {
    std::fprintf(stderr, "stripefs-bench: %s\n", geometry.error().message.c_str());
    return 2;
  }
  auto engine = IoEngine::create(256);
  if (!engine) {
    std::fprintf(stderr, "stripefs-bench: %s\n", engine.error().message.c_str());
    return 1;
  }
  auto files = MemberFiles::create(options.dir, options.members, options.member_size, **engine);
  if (!files) {
    std::fprintf(stderr, "stripefs-bench: %s\n", files.error().message.c_str());
    return 1;
  }
  auto volume = Volume::create(*geometry, (*files)->members(), kDataOffset);
  if (!volume) {
    std::fprintf(stderr, "stripefs-bench: %s\n", volume.error().message.c_str());
    return 1;
  }
  Volume& v = **volume;
  FixedBuffer parity_registration;  // unregistered before the Volume frees the arena
  if (!v.parity_arena().empty()) {
    auto r = (*engine)->register_buffer(v.parity_arena().data(), v.parity_arena().size());
    if (!r) {
      std::fprintf(stderr, "stripefs-bench: %s\n", r.error().message.c_str());
      return 1;
    }
    parity_registration = std::move(*r);
  }
  const Geometry& g = v.geometry();
  // One request covers `per_request` whole stripes; the whole volume is written each pass.
  const uint64_t per_request = std::max<uint64_t>(1, options.request_size / g.stripe_data_size());
  const uint64_t requests = g.stripes() / per_request;
  const uint64_t request_bytes = per_request * g.stripe_data_size();
  const uint64_t data_bytes = requests * request_bytes;
  if (requests == 0) {
    std::fprintf(stderr, "stripefs-bench: the volume (%llu bytes) holds no whole request of %llu\n",
                 static_cast<unsigned long long>(g.volume_size()),
                 static_cast<unsigned long long>(per_request * g.stripe_data_size()));
    return 2;
  }
  const uint64_t member_write_bytes =
      requests * per_request * g.chunk_size() * (g.data_chunks() * g.copies() + g.parity_chunks());
  const uint64_t member_read_bytes = data_bytes;

  std::printf("# %s of %u members, chunk %s, %s per member in %s; %s per request, depth %u\n",
              std::string(to_string(g.level())).c_str(), g.members(),
              format_size(g.chunk_size()).c_str(), format_size(options.member_size).c_str(),
              options.dir.c_str(), format_size(request_bytes).c_str(), options.depth);
  // A buffer per in-flight request, filled with data once: parity is real work each pass.
  std::vector<AlignedBuffer> buffers;
  const uint64_t slot_bytes =
      per_request * g.chunk_size() * (g.data_chunks() * g.copies() + g.parity_chunks());
  for (unsigned i = 0; i < options.depth; ++i) {
    buffers.emplace_back(std::max(request_bytes, slot_bytes));
    auto* words = reinterpret_cast<uint64_t*>(buffers.back().data());
    for (size_t w = 0; w < buffers.back().size() / 8; ++w) words[w] = w * 0x9e3779b97f4a7c15ull + i;
  }
  std::vector<Member*> member_list = (*files)->members();

  std::vector<double> volume_write, volume_read, direct_write, direct_read;
  for (unsigned pass = 0; pass < options.repeat; ++pass) {
    Result<void> status;
    direct_write.push_back(time_it([&] {
      status = run_queued(requests, options.depth, [&](uint64_t i, auto done) {
        auto ios =
            member_ranges(g, i * per_request, per_request, true, buffers[i % options.depth].data());
        submit_ios(member_list, MemberOp::write, std::move(ios), false,
                   [done](std::vector<FailedIo> f) {
                     done(f.empty() ? Result<void>{} : fail(EIO, "direct write failed"));
                   });
      });
    }));
    if (!status) break;
    volume_write.push_back(time_it([&] {
      status = run_queued(requests, options.depth, [&](uint64_t i, auto done) {
        v.write({{i * request_bytes, buffers[i % options.depth].span().subspan(0, request_bytes)}},
                done);
      });
    }));
    if (!status) break;
    direct_read.push_back(time_it([&] {
      status = run_queued(requests, options.depth, [&](uint64_t i, auto done) {
        auto ios = member_ranges(g, i * per_request, per_request, false,
                                 buffers[i % options.depth].data());
        submit_ios(member_list, MemberOp::read, std::move(ios), false,
                   [done](std::vector<FailedIo> f) {
                     done(f.empty() ? Result<void>{} : fail(EIO, "direct read failed"));
                   });
      });
    }));
    if (!status) break;
    volume_read.push_back(time_it([&] {
      status = run_queued(requests, options.depth, [&](uint64_t i, auto done) {
        v.read({{i * request_bytes, buffers[i % options.depth].span().subspan(0, request_bytes)}},
               done);
      });
    }));
    if (!status) {
      std::fprintf(stderr, "stripefs-bench: %s\n", status.error().message.c_str());
      return 1;
    }
  }
  if (volume_write.size() != options.repeat || volume_read.size() != options.repeat) {
    std::fprintf(stderr, "stripefs-bench: I/O failed during the run\n");
    return 1;
  }
  const double mib = 1024.0 * 1024.0;
  const double vw = median(volume_write), vr = median(volume_read);
  const double dw = median(direct_write), dr = median(direct_read);
  const auto stats = v.stats();
  result("volume_write_data", data_bytes / vw / mib, "MiB/s");
  result("volume_write_member", member_write_bytes / vw / mib, "MiB/s");
  result("direct_write_member", member_write_bytes / dw / mib, "MiB/s");
  result("volume_read_data", member_read_bytes / vr / mib, "MiB/s");
  result("direct_read_member", member_read_bytes / dr / mib, "MiB/s");
  result("full_stripe_fraction", static_cast<double>(stats.full_stripe_bytes) /
                                     static_cast<double>(std::max<uint64_t>(
                                         1, stats.full_stripe_bytes + stats.partial_stripe_bytes)));
  result("preread_bytes", static_cast<double>(stats.preread_bytes), "B");
  const auto engine_stats = (*engine)->stats();
  result("fixed_buffer_requests", static_cast<double>(engine_stats.fixed_requests));
  result("requests_per_submit",
         static_cast<double>(engine_stats.requests) /
             static_cast<double>(std::max<uint64_t>(1, engine_stats.submit_calls)));
  // Same member bytes both ways, so the ratio of times is the ratio of throughputs.
  result("write_ratio", dw / vw);
  result("read_ratio", dr / vr);
  return 0;
}

}  // namespace stripefs::bench
