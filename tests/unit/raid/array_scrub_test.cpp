// The scrub as a background task: it finds a chunk corrupted behind the array's back and
// names its member, repairs it when asked, is refused when it could not run or would race
// another task, and stops on request and at close.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "raid/array.hpp"
#include "raid/level.hpp"
#include "unit/raid/test_util.hpp"

namespace stripefs {
namespace {

constexpr uint32_t kChunk = 64 * 1024;
constexpr uint64_t kMemberSize = 6 << 20;

struct Scrubbing {
  test::MemoryArray media;
  std::unique_ptr<Array> array;
  AlignedBuffer data;

  explicit Scrubbing(RaidLevel level = RaidLevel::raid6, unsigned members = 5)
      : media(members, kMemberSize) {
    ArrayOptions create;
    create.level = level;
    create.chunk_size = kChunk;
    EXPECT_TRUE(create_array(media.members(), create));
    auto opened = Array::open(media.members());
    EXPECT_TRUE(opened) << opened.error().message;
    array = std::move(*opened);
    data = test::random_buffer(array->volume().size(), 3);
    EXPECT_TRUE(array->volume().write(0, data.span()));
  }
  ~Scrubbing() { array.reset(); }
  // Flips bytes of slot `slot` of `stripe`'s set on its member, behind the array's back.
  unsigned corrupt(uint64_t stripe, size_t slot) {
    const ChunkLocation at =
        Level::create(array->volume().geometry())->redundancy_set(stripe)[slot];
    std::byte* chunk = media.media[at.member]->contents().data() + array->superblock().data_offset +
                       at.member_offset;
    for (size_t i = 0; i < 4096; ++i) chunk[i] ^= std::byte{0x11};
    return at.member;
  }
};

TEST(ArrayScrub, NamesTheBadMemberAndRepairsWhenAsked) {
  Scrubbing s;
  const unsigned member = s.corrupt(7, 2);
  ASSERT_TRUE(s.array->start_scrub(false));
  ScrubProgress check = s.array->wait_scrub();
  EXPECT_FALSE(check.error) << check.error->message;
  EXPECT_FALSE(check.running);
  EXPECT_FALSE(check.stopped);
  EXPECT_EQ(check.done, check.total);
  EXPECT_EQ(check.counts.stripes, s.array->volume().geometry().stripes());
  EXPECT_EQ(check.counts.mismatched, 1u);
  EXPECT_EQ(check.counts.repaired, 0u);
  ASSERT_GT(check.counts.bad_chunks.size(), member);
  EXPECT_EQ(check.counts.bad_chunks[member], 1u);
  EXPECT_TRUE(check.ended);

  ASSERT_TRUE(s.array->start_scrub(true));
  const ScrubProgress repair = s.array->wait_scrub();
  EXPECT_TRUE(repair.repair);
  EXPECT_EQ(repair.counts.mismatched, 1u);
  EXPECT_EQ(repair.counts.repaired, 1u);
  ASSERT_TRUE(s.array->start_scrub(false));
  EXPECT_EQ(s.array->wait_scrub().counts.mismatched, 0u) << "not clean after the repair";
  AlignedBuffer back(s.array->volume().size());
  ASSERT_TRUE(s.array->volume().read(0, back.span()));
  EXPECT_EQ(std::memcmp(back.data(), s.data.data(), back.size()), 0);
}

TEST(ArrayScrub, IsRefusedWhenItCannotRunAndStopsOnRequest) {
  Scrubbing s;
  // Slow: a stripe's chunk a second, so it is still running when asked again and stopped.
  s.array->set_rebuild_speed(kChunk, kChunk);
  ASSERT_TRUE(s.array->start_scrub(false));
  auto again = s.array->start_scrub(true);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, EBUSY);
  s.array->stop_scrub();
  const ScrubProgress stopped = s.array->scrub_progress();
  EXPECT_FALSE(stopped.running);
  EXPECT_TRUE(stopped.stopped);
  EXPECT_LT(stopped.done, stopped.total);
  EXPECT_FALSE(stopped.error);

  s.array->volume().fail_member(1, Error{EIO, "pulled"});
  auto degraded = s.array->start_scrub(false);
  ASSERT_FALSE(degraded);
  EXPECT_EQ(degraded.error().code, EAGAIN);
}

// md's limits: the minimum while the array has user I/O, the maximum while it has none. An
// idle array's scrub is not held to the minimum by its own I/O: neither its member reads nor
// a checker's reads through the volume (as the filesystem reads its metadata) are the
// user's. Rounds are 1 MiB of each member (a quarter of the maximum, 4 MiB a second): about
// a second and a half for the whole array at the maximum, a minute and a half at the minimum
// (64 KiB a second).
TEST(ArrayScrub, AnIdleArraysScrubRunsAtTheIdleLimit) {
  Scrubbing s;
  class ReadingChecker final : public ScrubChecker {
   public:
    explicit ReadingChecker(Volume& volume) : volume_(volume) {}
    Result<void> begin(const std::atomic<bool>&) override { return read(0); }
    Result<std::unique_ptr<ScrubBatch>> batch(uint64_t begin, uint64_t) override {
      if (auto r = read(begin); !r) return fail(r.error());
      return std::unique_ptr<ScrubBatch>();
    }
    void end() override {}
    uint64_t reads = 0;

   private:
    Result<void> read(uint64_t at) {
      AlignedBuffer block(4096);
      ++reads;
      return volume_.read(at, block.span());
    }
    Volume& volume_;
  } checker(s.array->volume());
  s.array->set_scrub_checker(&checker);
  s.array->set_rebuild_speed(kChunk, 4u << 20);  // rounds of 1 MiB of each member
  ASSERT_TRUE(s.array->start_scrub(false));
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (s.array->scrub_progress().running && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const ScrubProgress progress = s.array->scrub_progress();
  EXPECT_FALSE(progress.running) << "held to the busy limit: " << progress.done << " of "
                                 << progress.total << " stripes after 30 s";
  s.array->stop_scrub();
  EXPECT_GT(checker.reads, 2u) << "the checker read through the volume in every round";
  s.array->set_scrub_checker(nullptr);
}

// A member failing during the scrub ends it with an error that says so; nothing is
// "repaired" onto a member out of service.
TEST(ArrayScrub, AMemberFailingMidwayEndsItWithAnError) {
  Scrubbing s;
  s.array->set_rebuild_speed(kChunk, kChunk);  // a stripe's chunk a second
  ASSERT_TRUE(s.array->start_scrub(true));
  s.array->volume().fail_member(3, Error{EIO, "pulled"});
  s.array->set_rebuild_speed(0, 0);  // no limit: on to the next stripe at once
  const ScrubProgress ended = s.array->wait_scrub();
  ASSERT_TRUE(ended.error);
  EXPECT_EQ(ended.error->code, EAGAIN);
  EXPECT_NE(ended.error->message.find("a scrub needs every member"), std::string::npos)
      << ended.error->message;
  EXPECT_LT(ended.done, ended.total);
  EXPECT_EQ(ended.counts.repaired, 0u);
}

TEST(ArrayScrub, IsRefusedOnRaid0AndEndsAtClose) {
  {
    Scrubbing s(RaidLevel::raid0, 2);
    auto r = s.array->start_scrub(false);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, EINVAL);
  }
  Scrubbing s;
  s.array->set_rebuild_speed(kChunk, kChunk);
  ASSERT_TRUE(s.array->start_scrub(false));
  ASSERT_TRUE(s.array->close());
  const ScrubProgress ended = s.array->scrub_progress();
  EXPECT_FALSE(ended.running);
  EXPECT_TRUE(ended.stopped);
}

// A scrub cut short by a close is checkpointed in the superblocks and resumed after the next
// open from where it got to, with its repair setting; it finds what lies past the
// checkpoint, and when it ends the checkpoint goes and its end and counts stay (also for
// status after a later open). A scrub stopped on request is not resumed.
TEST(ArrayScrub, AScrubCutShortByACloseResumesAtTheNextOpen) {
  Scrubbing s;
  const uint64_t stripes = s.array->volume().geometry().stripes();
  s.corrupt(1, 0);                                    // found before the close
  const unsigned member = s.corrupt(stripes - 2, 1);  // past where the first run stops
  s.array->set_rebuild_speed(4 * kChunk, 4 * kChunk);
  ASSERT_TRUE(s.array->start_scrub(true));
  while (s.array->scrub_progress().done < 4) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(s.array->close());
  const ScrubProgress cut = s.array->scrub_progress();
  EXPECT_TRUE(cut.stopped);
  ASSERT_LT(cut.done, stripes);
  auto sb = read_superblock(*s.media.members()[0]);
  ASSERT_TRUE(sb);
  EXPECT_EQ(sb->scrub_checkpoint, cut.done);
  EXPECT_EQ(sb->scrub_flags, Superblock::kScrubRepair);
  EXPECT_EQ(sb->scrub_repaired, 1u) << "the counts so far go with the checkpoint";
  EXPECT_EQ(sb->last_scrub, 0u);

  s.array.reset();
  auto opened = Array::open(s.media.members());
  ASSERT_TRUE(opened) << opened.error().message;
  s.array = std::move(*opened);
  ASSERT_TRUE(s.array->resume_scrub());
  const ScrubProgress resumed = s.array->wait_scrub();
  EXPECT_FALSE(resumed.error);
  EXPECT_TRUE(resumed.repair);
  EXPECT_EQ(resumed.first, cut.done);
  EXPECT_EQ(resumed.done, stripes);
  EXPECT_EQ(resumed.counts.stripes, stripes - cut.done) << "the checked part was done again";
  EXPECT_EQ(resumed.counts.repaired, 2u) << "one before the close, one after";
  EXPECT_EQ(resumed.counts.bad_chunks[member], 1u);
  EXPECT_FALSE(s.array->resume_scrub()) << "a finished scrub is resumed";
  ASSERT_TRUE(s.array->close());
  sb = read_superblock(*s.media.members()[0]);
  ASSERT_TRUE(sb);
  EXPECT_EQ(sb->scrub_checkpoint, kNoScrub);
  EXPECT_GT(sb->last_scrub, 0u);
  EXPECT_EQ(sb->last_scrub_repaired, 2u);
  EXPECT_EQ(sb->scrub_repaired, 0u);

  // After another open, status shows the last scrub from the superblocks.
  s.array.reset();
  opened = Array::open(s.media.members());
  ASSERT_TRUE(opened) << opened.error().message;
  s.array = std::move(*opened);
  const ScrubProgress last = s.array->scrub_progress();
  EXPECT_TRUE(last.before_mount);
  EXPECT_FALSE(last.running);
  ASSERT_TRUE(last.ended);
  EXPECT_EQ(last.counts.repaired, 2u);
  // Stopped on request: nothing to resume.
  s.array->set_rebuild_speed(kChunk, kChunk);
  ASSERT_TRUE(s.array->start_scrub(false));
  s.array->stop_scrub();
  ASSERT_TRUE(s.array->close());
  sb = read_superblock(*s.media.members()[0]);
  ASSERT_TRUE(sb);
  EXPECT_EQ(sb->scrub_checkpoint, kNoScrub);
}

// A crash mid-scrub: the next open resyncs first (the array was not shut down cleanly), and
// resume_scrub() waits for that instead of being refused; the scrub then goes on from the
// checkpoint the crash left.
TEST(ArrayScrub, AScrubCutShortByACrashResumesAfterTheResync) {
  Scrubbing s;
  s.array->set_rebuild_speed(4 * kChunk, 4 * kChunk);
  ASSERT_TRUE(s.array->start_scrub(false));
  while (s.array->scrub_progress().done < 2) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // The crash: the members as they are now, under a running array.
  std::vector<std::vector<std::byte>> image;
  for (auto& m : s.media.media) image.emplace_back(m->contents().begin(), m->contents().end());
  s.array.reset();
  for (size_t i = 0; i < image.size(); ++i) {
    std::copy(image[i].begin(), image[i].end(), s.media.media[i]->contents().begin());
  }
  auto sb = read_superblock(*s.media.members()[0]);
  ASSERT_TRUE(sb);
  ASSERT_FALSE(sb->clean());
  ASSERT_NE(sb->scrub_checkpoint, kNoScrub);
  // Slow members: the resync is still running when the scrub is resumed.
  for (auto& f : s.media.faulty) f->set_latency(std::chrono::microseconds(2000));
  auto opened = Array::open(s.media.members());
  ASSERT_TRUE(opened) << opened.error().message;
  s.array = std::move(*opened);
  EXPECT_FALSE(s.array->resync_progress().finished);
  ASSERT_TRUE(s.array->resume_scrub()) << "refused beside the resync";
  EXPECT_FALSE(s.array->scrub_progress().running) << "started beside the resync";
  for (auto& f : s.media.faulty) f->set_latency(std::chrono::microseconds(0));
  ScrubProgress resumed;
  for (int i = 0; i < 3000; ++i) {
    resumed = s.array->scrub_progress();
    if (resumed.ended && !resumed.running && !resumed.before_mount) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(resumed.ended) << "the scrub did not run";
  EXPECT_FALSE(resumed.error);
  EXPECT_EQ(resumed.first, sb->scrub_checkpoint);
  EXPECT_EQ(resumed.done, resumed.total);
  EXPECT_TRUE(s.array->resync_progress().finished);
}

}  // namespace
}  // namespace stripefs
