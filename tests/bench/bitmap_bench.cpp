// stripefs-bench bitmap: what the write-intent bitmap costs and what it saves, on one RAID5
// array of member files, in one run:
//  - 4 KiB random writes into a hot working set with the bitmap in use vs the same array
//    opened without it (alternating passes, medians);
//  - resync after a simulated crash with 1% of the bitmap's regions dirty vs a full resync.
#include "bench/bitmap_bench.hpp"

#include <cstdio>
#include <random>

#include "bench/bench_util.hpp"
#include "journal/array_bitmap.hpp"
#include "journal/array_journal.hpp"
#include "journal/log_format.hpp"
#include "journal/write_intent_bitmap.hpp"
#include "raid/aligned_buffer.hpp"
#include "raid/units.hpp"

namespace stripefs::bench {

namespace {

using std::chrono::milliseconds;

int fail_with(const Error& e) {
  std::fprintf(stderr, "stripefs-bench: %s\n", e.message.c_str());
  return 1;
}

// Marks every member's superblock as running (dirty): what a crash leaves behind.
Result<void> simulate_crash(std::span<Member* const> members) {
  for (Member* m : members) {
    auto sb = read_superblock(*m);
    if (!sb) return fail(sb.error());
    sb->set_clean(false);
    if (auto w = write_superblock(*m, *sb); !w) return w;
  }
  return {};
}

Result<double> timed_random_writes(Array& array, const BitmapBenchOptions& o, uint64_t seed,
                                   std::vector<AlignedBuffer>& buffers) {
  Volume& volume = array.volume();
  const uint64_t blocks = std::min(o.working_set, volume.size()) / 4096;
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> offsets(o.writes);
  for (auto& at : offsets) at = rng() % blocks * 4096;
  Result<void> status;
  const double seconds = time_it([&] {
    status = run_queued(o.writes, o.depth, [&](uint64_t i, auto done) {
      volume.write({{offsets[i], buffers[i % o.depth].span()}}, done);
    });
  });
  if (!status) return fail(status.error());
  return static_cast<double>(o.writes) / seconds;
}

}  // namespace

int run_bitmap_bench(const BitmapBenchOptions& o) {
  auto engine = IoEngine::create(256);
  if (!engine) return fail_with(engine.error());
  auto files = MemberFiles::create(o.dir, o.members, o.member_size, **engine);
  if (!files) return fail_with(files.error());
  std::vector<Member*> members = (*files)->members();
  ArrayOptions create;
  create.level = RaidLevel::raid5;
  create.chunk_size = 64 * 1024;
  create.assume_clean = true;  // fresh zeroed files: parity of zeros is zero
  add_bitmap(create, o.region_size, milliseconds(0));
  auto created = create_array(members, create);
  if (!created) return fail_with(created.error());
  OpenOptions with_bitmap, without_bitmap;
  use_bitmap(with_bitmap, milliseconds(0));  // bits stay set: the working set stays hot
  without_bitmap.ignore_bitmap = true;

  std::vector<AlignedBuffer> buffers;
  for (unsigned i = 0; i < o.depth; ++i) buffers.push_back(AlignedBuffer(4096));
  for (auto& b : buffers) b.zero();

  std::printf(
      "# raid5 of %u members of %s in %s; bitmap regions of %s; %llu random 4 KiB "
      "writes in %s per pass, depth %u\n",
      o.members, format_size(o.member_size).c_str(), o.dir.c_str(),
      format_size(o.region_size).c_str(), static_cast<unsigned long long>(o.writes),
      format_size(o.working_set).c_str(), o.depth);

  // Random writes, bitmap on vs off, alternating so drift hits both alike.
  std::vector<double> on, off;
  {
    auto array = Array::open(members, with_bitmap);
    if (!array) return fail_with(array.error());
    // Warm-up: every region of the working set gets its bit.
    for (uint64_t at = 0; at < std::min(o.working_set, (*array)->volume().size());
         at += o.region_size / 2) {
      if (auto w = (*array)->volume().write(at, buffers[0].span()); !w) return fail_with(w.error());
    }
    if (auto c = (*array)->close(); !c) return fail_with(c.error());
  }
  for (unsigned pass = 0; pass < o.repeat; ++pass) {
    for (bool bitmap : {true, false}) {
      auto array = Array::open(members, bitmap ? with_bitmap : without_bitmap);
      if (!array) return fail_with(array.error());
      auto iops = timed_random_writes(**array, o, pass * 2 + bitmap, buffers);
      if (!iops) return fail_with(iops.error());
      (bitmap ? on : off).push_back(*iops);
      if (auto c = (*array)->close(); !c) return fail_with(c.error());
    }
  }
  result("randwrite_bitmap_on", median(on), "IOPS");
  result("randwrite_bitmap_off", median(off), "IOPS");
  result("bitmap_randwrite_ratio", median(on) / median(off));

  // Resync after a crash: everything (no bitmap) vs the regions the bitmap recorded.
  std::vector<double> full, partial;
  uint64_t dirty_regions = 0, regions = 0;
  for (unsigned pass = 0; pass < o.repeat; ++pass) {
    {
      // Clean every bit, then dirty 1% of the regions, spread over the volume.
      auto array = Array::open(members, with_bitmap);
      if (!array) return fail_with(array.error());
      auto* bitmap = static_cast<WriteIntentBitmap*>((*array)->write_intent());
      if (auto c = bitmap->clear_idle(milliseconds(0)); !c) return fail_with(c.error());
      regions = bitmap->header().regions;
      const uint64_t step = 100;
      const uint64_t rows_per_region = o.region_size / create.chunk_size;
      const uint64_t stripe = (*array)->volume().geometry().stripe_data_size();
      for (uint64_t r = pass % step; r < regions; r += step) {
        const uint64_t at = r * rows_per_region * stripe;
        if (at >= (*array)->volume().size()) break;
        if (auto w = (*array)->volume().write(at, buffers[0].span()); !w) {
          return fail_with(w.error());
        }
      }
      dirty_regions = bitmap->dirty_regions();
      if (auto c = (*array)->close(); !c) return fail_with(c.error());
    }
    for (bool bitmap : {false, true}) {
      if (auto crash = simulate_crash(members); !crash) return fail_with(crash.error());
      std::unique_ptr<Array> array;
      ResyncProgress progress;
      const double seconds = time_it([&] {
        auto opened = Array::open(members, bitmap ? with_bitmap : without_bitmap);
        if (opened) {
          array = std::move(*opened);
          progress = array->wait_resync();
        }
      });
      if (!array) return fail_with(Error{EIO, "reopening after the simulated crash failed"});
      if (progress.error) return fail_with(*progress.error);
      (bitmap ? partial : full).push_back(seconds);
      if (auto c = array->close(); !c) return fail_with(c.error());
    }
  }
  // The write hole's price: the same random writes with every partial stripe logged on a
  // journal device (a file in the same directory) first.
  auto journal_file = MemberFiles::create(o.dir + "/journal", 1, 256ull << 20, **engine);
  if (!journal_file) return fail_with(journal_file.error());
  Member& journal_device = *(*journal_file)->members()[0];
  ArrayOptions journaled = create;
  journaled.force = true;  // over the array measured above
  add_stripe_journal(journaled, journal_device, 0, (256ull << 20) / kJournalBlockSize);
  if (auto c = create_array(members, journaled); !c) return fail_with(c.error());
  OpenOptions with_journal = with_bitmap;
  use_stripe_journal(with_journal, &journal_device);
  // --repeat passes of the random writes on the array opened with `with`: their IOPS.
  auto passes = [&](const OpenOptions& with, uint64_t seed) -> Result<std::vector<double>> {
    std::vector<double> out;
    for (unsigned pass = 0; pass < o.repeat; ++pass) {
      auto array = Array::open(members, with);
      if (!array) return fail(array.error());
      auto iops = timed_random_writes(**array, o, seed + pass, buffers);
      if (!iops) return fail(iops.error());
      out.push_back(*iops);
      if (auto c = (*array)->close(); !c) return fail(c.error());
    }
    return out;
  };
  auto logged = passes(with_journal, 100);
  if (!logged) return fail_with(logged.error());
  result("randwrite_journal", median(*logged), "IOPS");
  result("journal_randwrite_ratio", median(*logged) / median(on));

  // The default placement: the journal mirrored on the first two members.
  ArrayOptions on_members = create;
  on_members.force = true;
  add_member_journal(on_members, (64ull << 20) / kJournalBlockSize);
  if (auto c = create_array(members, on_members); !c) return fail_with(c.error());
  OpenOptions with_member_journal = with_bitmap;
  use_stripe_journal(with_member_journal, nullptr);
  auto mirrored = passes(with_member_journal, 200);
  if (!mirrored) return fail_with(mirrored.error());
  result("randwrite_member_journal", median(*mirrored), "IOPS");
  result("member_journal_randwrite_ratio", median(*mirrored) / median(on));

  result("dirty_regions", static_cast<double>(dirty_regions));
  result("regions", static_cast<double>(regions));
  result("resync_full", median(full), "s");
  result("resync_dirty1pct", median(partial), "s");
  result("resync_dirty1pct_ratio", median(partial) / median(full));
  return 0;
}

}  // namespace stripefs::bench
