// stripefs-bench rebuild: how fast a failed member is rebuilt onto a new device, and how much
// of the user's I/O a rate-limited rebuild leaves, on one array of member files, in one run:
//  - the baselines: one member's data area read sequentially, directly (1 MiB requests, 4 in
//    flight), as fast as the member goes; and the member I/O a rebuild does (every source
//    read, the new device written, 4 MiB at a time, two batches in flight) done directly,
//    without parity or stripe locks (every other member is a source: exact for RAID 1, 5
//    and 6; at RAID10 a rebuild reads only the mirror, so there it is a generous baseline). On
//    tmpfs the members share one memory bus and the CPUs, so a rebuild, which moves (members - 1)
//    reads and a write per byte rebuilt, cannot match the first; the second shows what the engine
//    itself costs;
//  - an unlimited rebuild of role 0 onto a new device with the array idle: member bytes
//    written per second, and its ratio to the baseline;
//  - an unlimited hot replace of role 0 (in service) onto another device, idle: bytes copied
//    per second (the old device read, the new one written: no parity), and its ratios to the
//    direct read and to the same copy done directly (4 MiB at a time, two in flight);
//  - a scrub (check only) of the whole array, idle: member bytes read per second, against
//    every member's data area read at once, directly (the scrub reads every member);
//  - full-stripe writes to the degraded array for a few seconds, alone and then beside a
//    rebuild limited to --limit (md's speed_limit_min = max): the share of write throughput
//    kept, and the rebuild's own rate meanwhile.
// Passes alternate the new device between two files; figures are medians. With --device-rate,
// every member file is served as an independent device of that bandwidth (ModeledDevice):
// then the ratio to the direct read says how close the rebuild comes to one member's
// streaming speed, as it would on disks or SSDs.
#include "bench/rebuild_bench.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <thread>

#include "bench/bench_util.hpp"
#include "bench/modeled_device.hpp"
#include "raid/aligned_buffer.hpp"
#include "raid/array.hpp"
#include "raid/level.hpp"
#include "raid/units.hpp"

namespace stripefs::bench {

namespace {

constexpr uint64_t kReadRequest = 1 << 20;
constexpr unsigned kDepth = 4;
constexpr uint64_t kUnlimited = uint64_t{1} << 40;  // bytes per second: no limit, busy or not

int fail_with(const Error& e) {
  std::fprintf(stderr, "stripefs-bench: %s\n", e.message.c_str());
  return 1;
}

// Bytes per second of `member`'s [offset, offset + size) read sequentially.
Result<double> direct_read(Member& member, uint64_t offset, uint64_t size) {
  std::vector<AlignedBuffer> buffers;
  for (unsigned i = 0; i < kDepth; ++i) buffers.emplace_back(kReadRequest);
  const uint64_t requests = size / kReadRequest;
  Result<void> status;
  const double seconds = time_it([&] {
    status = run_queued(requests, kDepth, [&](uint64_t i, auto done) {
      MemberRequest request;
      request.op = MemberOp::read;
      request.offset = offset + i * kReadRequest;
      request.iov.push_back({buffers[i % kDepth].data(), kReadRequest});
      request.done = [done](int64_t n) {
        done(n == static_cast<int64_t>(kReadRequest) ? Result<void>{}
                                                     : fail(EIO, "short or failed read"));
      };
      member.submit(std::move(request));
    });
  });
  if (!status) return fail(status.error());
  return static_cast<double>(requests * kReadRequest) / seconds;
}

// The member I/O a rebuild of [offset, offset + size) does, done directly: each batch reads
// kBatch bytes from every source at once, then writes them to `target` (no parity, no stripe
// locks), two batches in flight. Bytes written to the target per second.
Result<double> direct_rebuild_io(std::span<Member* const> sources, Member& target, uint64_t offset,
                                 uint64_t size) {
  constexpr uint64_t kBatch = 4 << 20;
  constexpr unsigned kInFlight = 2;
  std::vector<std::vector<AlignedBuffer>> buffers(kInFlight);
  for (auto& set : buffers) {
    for (size_t i = 0; i < sources.size(); ++i) set.emplace_back(kBatch);
  }
  const uint64_t batches = size / kBatch;
  Result<void> status;
  const double seconds = time_it([&] {
    status = run_queued(batches, kInFlight, [&](uint64_t b, auto done) {
      auto& set = buffers[b % kInFlight];
      auto left = std::make_shared<std::atomic<size_t>>(sources.size());
      auto failed = std::make_shared<std::atomic<bool>>(false);
      for (size_t i = 0; i < sources.size(); ++i) {
        MemberRequest read;
        read.op = MemberOp::read;
        read.offset = offset + b * kBatch;
        read.iov.push_back({set[i].data(), kBatch});
        read.done = [&, b, left, failed, done](int64_t n) {
          if (n != static_cast<int64_t>(kBatch)) *failed = true;
          if (--*left != 0) return;
          if (*failed) return done(fail(EIO, "direct read failed"));
          MemberRequest write;
          write.op = MemberOp::write;
          write.offset = offset + b * kBatch;
          write.iov.push_back({set[0].data(), kBatch});
          write.done = [done, kBatch](int64_t m) {
            done(m == static_cast<int64_t>(kBatch) ? Result<void>{}
                                                   : fail(EIO, "direct write failed"));
          };
          target.submit(std::move(write));
        };
        sources[i]->submit(std::move(read));
      }
    });
  });
  if (!status) return fail(status.error());
  return static_cast<double>(batches * kBatch) / seconds;
}

// Bytes per second of every member's [offset, offset + size) read sequentially, all at once
// (one thread per member, as direct_read): what a scrub, which reads every member, can reach.
Result<double> combined_read(std::span<Member* const> members, uint64_t offset, uint64_t size) {
  std::vector<Result<double>> each(members.size(), 0.0);
  const double seconds = time_it([&] {
    std::vector<std::thread> threads;
    for (size_t i = 0; i < members.size(); ++i) {
      threads.emplace_back([&, i] { each[i] = direct_read(*members[i], offset, size); });
    }
    for (auto& t : threads) t.join();
  });
  for (const auto& r : each) {
    if (!r) return fail(r.error());
  }
  return static_cast<double>(members.size() * (size / kReadRequest * kReadRequest)) / seconds;
}

// Full-stripe writes, sequential and wrapping, for `seconds`: bytes per second.
Result<double> stripe_writes(Volume& volume, double seconds, const AlignedBuffer& data) {
  const uint64_t stripe = volume.geometry().stripe_data_size();
  const uint64_t stripes = volume.size() / stripe;
  std::atomic<uint64_t> next{0};
  uint64_t written = 0;
  Result<void> status;
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  const double took = time_it([&] {
    // Batches of kDepth writes in flight, until the time is up.
    while (std::chrono::steady_clock::now() < until && status) {
      status = run_queued(64, kDepth, [&](uint64_t, auto done) {
        const uint64_t at = next++ % stripes * stripe;
        volume.write({{at, std::span<std::byte>(const_cast<std::byte*>(data.data()), stripe)}},
                     done);
      });
      written += 64 * stripe;
    }
  });
  if (!status) return fail(status.error());
  return static_cast<double>(written) / took;
}

}  // namespace

int run_rebuild_bench(const RebuildBenchOptions& o) {
  auto engine = IoEngine::create(256);
  if (!engine) return fail_with(engine.error());
  // The members, and two more files the rebuilds alternate between.
  auto files = MemberFiles::create(
      o.dir, o.members + 2, o.member_size, **engine, false,
      o.inline_members ? FileMember::InMemory::automatic : FileMember::InMemory::ring);
  if (!files) return fail_with(files.error());
  std::vector<Member*> all = (*files)->members();
  // With a device rate, each file is served as an independent device of that bandwidth.
  std::unique_ptr<DeviceClock> clock;
  std::vector<std::unique_ptr<ModeledDevice>> devices;
  if (o.device_rate != 0) {
    clock = std::make_unique<DeviceClock>();
    for (Member*& m : all) {
      devices.push_back(std::make_unique<ModeledDevice>(*m, o.device_rate, *clock));
      m = devices.back().get();
    }
  }
  std::vector<Member*> members(all.begin(), all.begin() + o.members);
  // Devices role 0 is not on: each rebuild takes one, and gives back the one it replaced.
  std::deque<Member*> free = {all[o.members], all[o.members + 1]};
  Member* current = members[0];
  const auto next_device = [&] {
    Member* d = free.front();
    free.pop_front();
    free.push_back(current);
    current = d;
    return d;
  };
  ArrayOptions create;
  create.level = o.level;
  create.chunk_size = o.chunk;
  create.assume_clean = true;
  auto created = create_array(members, create);
  if (!created) return fail_with(created.error());
  auto array = Array::open(members);
  if (!array) return fail_with(array.error());
  Volume& volume = (*array)->volume();
  const Geometry& g = volume.geometry();
  const uint64_t stripe = g.stripe_data_size();
  AlignedBuffer data(stripe);
  for (uint64_t i = 0; i < stripe; ++i) data.data()[i] = static_cast<std::byte>(i * 131 + 7);
  // Every member byte real data, so the reads below read pages, not holes.
  for (uint64_t at = 0; at + stripe <= volume.size(); at += stripe) {
    if (auto w = volume.write(at, data.span()); !w) return fail_with(w.error());
  }
  // What one member holds of the array's data (on RAID10 a member holds only some rows).
  const uint64_t rebuilt_bytes = created->data_size;
  std::printf(
      "# rebuild: %s, %u members of %s, chunk %s; %s rebuilt per pass; members %s%s\n",
      std::string(to_string(o.level)).c_str(), o.members, format_size(o.member_size).c_str(),
      format_size(o.chunk).c_str(), format_size(rebuilt_bytes).c_str(),
      o.device_rate == 0
          ? "as fast as the files go"
          : fmt::format("modeled as devices of {}/s each", format_size(o.device_rate)).c_str(),
      o.inline_members ? ", driven inline where on tmpfs" : ", driven through the ring");

  std::vector<double> direct, same_io, rebuild, replace, copy_io, alone, beside, limited_rate;
  std::vector<double> all_read, scrub;
  for (unsigned pass = 0; pass < o.repeat; ++pass) {
    auto read =
        direct_read(*members[1], created->data_offset, rebuilt_bytes / kReadRequest * kReadRequest);
    if (!read) return fail_with(read.error());
    direct.push_back(*read);
    // The same member I/O as the rebuild below, onto the device it will rebuild onto.
    const std::vector<Member*> sources(members.begin() + 1, members.end());
    auto io = direct_rebuild_io(sources, *free.front(), created->data_offset,
                                rebuilt_bytes / (4 << 20) * (4 << 20));
    if (!io) return fail_with(io.error());
    same_io.push_back(*io);

    // A scrub (check only) of the whole array, idle, against every member read at once.
    auto together = combined_read(members, created->data_offset, rebuilt_bytes);
    if (!together) return fail_with(together.error());
    all_read.push_back(*together);
    (*array)->set_rebuild_speed(kUnlimited, 0);
    const double scrub_took = time_it([&] {
      if (auto r = (*array)->start_scrub(false); !r) std::exit(fail_with(r.error()));
      (*array)->wait_scrub();
    });
    if (auto p = (*array)->scrub_progress(); p.error) return fail_with(*p.error);
    scrub.push_back(static_cast<double>(g.stripes() * g.chunk_size() * g.members()) / scrub_took);

    // Idle: as fast as it goes.
    Member* target = next_device();
    if (auto f = (*array)->fail_member(0); !f) return fail_with(f.error());
    (*array)->set_rebuild_speed(kUnlimited, 0);
    const double took = time_it([&] {
      if (auto r = (*array)->rebuild(0, target); !r) std::exit(fail_with(r.error()));
      (*array)->wait_rebuild();
    });
    if (auto p = (*array)->rebuild_progress(); p.error) return fail_with(*p.error);
    rebuild.push_back(static_cast<double>(rebuilt_bytes) / took);

    // Hot replace of role 0, in service, onto another device: idle, as fast as it goes; and
    // the same copy done directly first, onto the same device.
    const std::vector<Member*> old_device = {current};
    auto copy = direct_rebuild_io(old_device, *free.front(), created->data_offset,
                                  rebuilt_bytes / (4 << 20) * (4 << 20));
    if (!copy) return fail_with(copy.error());
    copy_io.push_back(*copy);
    Member* replacement = next_device();
    const double copy_took = time_it([&] {
      if (auto r = (*array)->replace(0, replacement); !r) std::exit(fail_with(r.error()));
      (*array)->wait_rebuild();
    });
    const RebuildProgress copied = (*array)->rebuild_progress();
    if (copied.error) return fail_with(*copied.error);
    replace.push_back(static_cast<double>(copied.total) / copy_took);

    // User writes alone (degraded), then beside a rate-limited rebuild.
    if (auto f = (*array)->fail_member(0); !f) return fail_with(f.error());
    auto w = stripe_writes(volume, o.seconds, data);
    if (!w) return fail_with(w.error());
    alone.push_back(*w);
    (*array)->set_rebuild_speed(o.limit, o.limit);
    if (auto r = (*array)->rebuild(0, next_device()); !r) return fail_with(r.error());
    w = stripe_writes(volume, o.seconds, data);
    if (!w) return fail_with(w.error());
    beside.push_back(*w);
    const RebuildProgress during = (*array)->rebuild_progress();
    limited_rate.push_back(during.seconds > 0 ? during.bytes / during.seconds : 0);
    (*array)->set_rebuild_speed(kUnlimited, 0);  // finish it: the next pass fails role 0 again
    if (auto p = (*array)->wait_rebuild(); p.error) return fail_with(*p.error);
    std::printf(
        "# pass %u: direct read %.0f MiB/s, its I/O done directly %.0f MiB/s, rebuild "
        "%.0f MiB/s, replace %.0f MiB/s, writes %.0f MiB/s alone, %.0f MiB/s beside a rebuild "
        "at %.0f MiB/s; every member read at once %.0f MiB/s, scrub %.0f MiB/s\n",
        pass + 1, direct.back() / (1 << 20), same_io.back() / (1 << 20), rebuild.back() / (1 << 20),
        replace.back() / (1 << 20), alone.back() / (1 << 20), beside.back() / (1 << 20),
        limited_rate.back() / (1 << 20), all_read.back() / (1 << 20), scrub.back() / (1 << 20));
  }
  const double mib = 1 << 20;
  result("rebuild.direct_read", median(direct) / mib, "MiB/s");
  result("rebuild.idle", median(rebuild) / mib, "MiB/s");
  result("rebuild.idle_vs_direct_read", median(rebuild) / median(direct), "ratio");
  result("rebuild.replace_idle", median(replace) / mib, "MiB/s");
  result("rebuild.replace_idle_vs_direct_read", median(replace) / median(direct), "ratio");
  result("rebuild.replace_same_io_direct", median(copy_io) / mib, "MiB/s");
  result("rebuild.replace_idle_vs_same_io_direct", median(replace) / median(copy_io), "ratio");
  result("rebuild.same_io_direct", median(same_io) / mib, "MiB/s");
  result("rebuild.idle_vs_same_io_direct", median(rebuild) / median(same_io), "ratio");
  result("rebuild.user_writes_alone", median(alone) / mib, "MiB/s");
  result("rebuild.user_writes_beside_limited", median(beside) / mib, "MiB/s");
  result("rebuild.user_share_kept", median(beside) / median(alone), "ratio");
  result("rebuild.limited_rate", median(limited_rate) / mib, "MiB/s");
  result("rebuild.limit", static_cast<double>(o.limit) / mib, "MiB/s");
  result("scrub.combined_read", median(all_read) / mib, "MiB/s");
  result("scrub.idle", median(scrub) / mib, "MiB/s");
  result("scrub.idle_vs_combined_read", median(scrub) / median(all_read), "ratio");
  return (*array)->close() ? 0 : 1;
}

}  // namespace stripefs::bench
