// stripefs-bench demo: the RAID engine end to end on member files, every step verified.
#include "bench/demo.hpp"

#include <cstdio>
#include <cstring>
#include <random>

#include "bench/bench_util.hpp"
#include "journal/array_bitmap.hpp"
#include "journal/array_journal.hpp"
#include "journal/open_array.hpp"
#include "journal/stripe_journal.hpp"
#include "journal/write_intent_bitmap.hpp"
#include "raid/aligned_buffer.hpp"
#include "raid/array.hpp"
#include "raid/units.hpp"

namespace stripefs::bench {

namespace {

void step(const std::string& what) {
  std::printf("-- %s\n", what.c_str());
}

bool check(bool ok, const std::string& what) {
  std::printf("   %s: %s\n", ok ? "ok" : "FAILED", what.c_str());
  return ok;
}

std::vector<Member*> as_members(const MemberFiles& files) {
  return files.members();
}

}  // namespace

int run_demo(const DemoOptions& options) {
  auto level = parse_raid_level(options.level);
  if (!level) {
    std::fprintf(stderr, "stripefs-bench: %s\n", level.error().message.c_str());
    return 2;
  }
  auto engine = IoEngine::create(256);
  if (!engine) {
    std::fprintf(stderr, "stripefs-bench: %s\n", engine.error().message.c_str());
    return 1;
  }
  auto files = MemberFiles::create(options.dir, options.members, options.member_size, **engine,
                                   /*keep=*/true);
  if (!files) {
    std::fprintf(stderr, "stripefs-bench: %s\n", files.error().message.c_str());
    return 1;
  }
  bool all_ok = true;
  std::vector<Member*> members = as_members(**files);

  step(fmt::format("creating {} on {} member files of {} in {}", to_string(*level), options.members,
                   format_size(options.member_size), options.dir));
  ArrayOptions create;
  create.level = *level;
  create.chunk_size = 64 * 1024;
  create.label = "demo";
  create.force = true;  // the demo re-creates its own array on every run
  add_bitmap(create);
  ArraySetup setup;
  setup.engine = engine->get();
  // RAID5/6: partial stripes go through a write-ahead journal on a separate device (here a
  // file beside the members), which closes the write hole.
  std::unique_ptr<MemberFiles> journal_file;
  const bool journaled = *level == RaidLevel::raid5 || *level == RaidLevel::raid6;
  if (journaled) {
    auto made = MemberFiles::create(options.dir + "/journal", 1, 16 << 20, **engine, true);
    if (!made) {
      std::fprintf(stderr, "stripefs-bench: %s\n", made.error().message.c_str());
      return 1;
    }
    journal_file = std::move(*made);
    Member& device = *journal_file->members()[0];
    add_stripe_journal(create, device, 0, (16 << 20) / kJournalBlockSize);
    setup.journal_device = &device;
  }
  auto created = create_array(members, create);
  if (!created) {
    std::fprintf(stderr, "stripefs-bench: %s\n", created.error().message.c_str());
    return 1;
  }
  std::printf("   array %s, chunk %s, %s per member from byte %llu\n",
              format_uuid(created->array_uuid).c_str(), format_size(created->chunk_size).c_str(),
              format_size(created->data_size).c_str(),
              static_cast<unsigned long long>(created->data_offset));
  all_ok &= check(created->clean(), "initial sync done, array recorded clean");
  std::printf("   write-intent bitmap: %llu regions of %s at byte %llu of each member\n",
              static_cast<unsigned long long>((created->data_size + created->bitmap_chunk - 1) /
                                              created->bitmap_chunk),
              format_size(created->bitmap_chunk).c_str(),
              static_cast<unsigned long long>(created->bitmap_offset));

  AlignedBuffer expected;
  {
    auto array = open_array(members, setup);
    if (!array) {
      std::fprintf(stderr, "stripefs-bench: %s\n", array.error().message.c_str());
      return 1;
    }
    Volume& volume = (*array)->volume();
    step(fmt::format("writing the whole volume ({}) in 1 MiB requests, then 200 small writes",
                     format_size(volume.size())));
    expected = AlignedBuffer(volume.size());
    std::mt19937_64 rng(2026);
    auto* words = reinterpret_cast<uint64_t*>(expected.data());
    for (size_t i = 0; i < expected.size() / 8; ++i) words[i] = rng();
    const uint64_t request = 1 << 20;
    for (uint64_t at = 0; at < volume.size(); at += request) {
      const uint64_t length = std::min(request, volume.size() - at);
      if (auto w = volume.write(at, {expected.data() + at, length}); !w) {
        std::fprintf(stderr, "stripefs-bench: %s\n", w.error().message.c_str());
        return 1;
      }
    }
    for (int i = 0; i < 200; ++i) {
      const uint64_t at = rng() % (volume.size() / 4096 - 4) * 4096;
      const uint64_t length = (1 + rng() % 4) * 4096;
      for (uint64_t b = 0; b < length; b += 8) {
        *reinterpret_cast<uint64_t*>(expected.data() + at + b) = rng();
      }
      if (auto w = volume.write(at, {expected.data() + at, length}); !w) {
        std::fprintf(stderr, "stripefs-bench: %s\n", w.error().message.c_str());
        return 1;
      }
    }
    const auto stats = volume.stats();
    std::printf(
        "   full stripes %llu (%s), partial stripes %llu: %llu read-modify-write, %llu "
        "reconstruct-write\n",
        static_cast<unsigned long long>(stats.full_stripe_writes),
        format_size(stats.full_stripe_bytes).c_str(),
        static_cast<unsigned long long>(stats.partial_stripe_writes),
        static_cast<unsigned long long>(stats.rmw_writes),
        static_cast<unsigned long long>(stats.rcw_writes));
    AlignedBuffer back(volume.size());
    auto r = volume.read(0, back.span());
    all_ok &= check(r && std::memcmp(back.data(), expected.data(), back.size()) == 0,
                    "every byte reads back");
    auto* bitmap = static_cast<WriteIntentBitmap*>((*array)->write_intent());
    std::printf(
        "   bitmap: %llu bits set before the first writes into their regions, %llu "
        "writes found their region already marked\n",
        static_cast<unsigned long long>(bitmap->stats().bits_set),
        static_cast<unsigned long long>(bitmap->stats().ready_at_once));
    if (auto* log = static_cast<StripeJournal*>((*array)->stripe_log())) {
      std::printf(
          "   journal: %llu partial stripes logged (%s) before being written in place, "
          "%llu checkpoints\n",
          static_cast<unsigned long long>(log->stats().stripes_logged),
          format_size(log->stats().bytes_logged).c_str(),
          static_cast<unsigned long long>(log->stats().checkpoints));
    }
    auto bad = volume.count_inconsistent_stripes(0, volume.geometry().stripes());
    all_ok &= check(bad && *bad == 0, fmt::format("parity consistent on all {} stripes",
                                                  volume.geometry().stripes()));

    if (volume.geometry().redundancy() > 0) {
      step("failing member 1 (as if it returned an I/O error)");
      volume.fail_member(1, Error{EIO, "demo: member pulled"});
      std::memset(back.data(), 0, back.size());
      r = volume.read(0, back.span());
      all_ok &= check(r && std::memcmp(back.data(), expected.data(), back.size()) == 0,
                      fmt::format("every byte reads back degraded ({} chunks rebuilt from parity "
                                  "or read from a mirror)",
                                  volume.stats().degraded_reads));
    }
    if (auto c = array->close(); !c) {
      std::fprintf(stderr, "stripefs-bench: %s\n", c.error().message.c_str());
      return 1;
    }
  }

  step("re-assembling from the members' superblocks");
  auto again = open_array(members, setup);
  if (!again) {
    std::fprintf(stderr, "stripefs-bench: %s\n", again.error().message.c_str());
    return 1;
  }
  for (const std::string& note : (*again)->notes()) std::printf("   note: %s\n", note.c_str());
  Volume& volume = (*again)->volume();
  if (volume.geometry().redundancy() > 0) {
    all_ok &= check(!volume.active(1) && volume.missing_members() == 1,
                    "the failed member stays out: the array runs degraded");
  }
  AlignedBuffer back(volume.size());
  auto r = volume.read(0, back.span());
  all_ok &= check(r && std::memcmp(back.data(), expected.data(), back.size()) == 0,
                  "every byte reads back after re-assembly");
  if (auto c = again->close(); !c) {
    std::fprintf(stderr, "stripefs-bench: %s\n", c.error().message.c_str());
    return 1;
  }
  std::printf("%s: member files are in %s\n", all_ok ? "demo passed" : "demo FAILED",
              options.dir.c_str());
  return all_ok ? 0 : 1;
}

}  // namespace stripefs::bench
