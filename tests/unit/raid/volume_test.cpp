#include "raid/volume.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "unit/raid/test_util.hpp"

namespace stripefs {
namespace {

constexpr uint32_t kChunk = 16384;
constexpr uint64_t kRows = 24;
constexpr uint64_t kDataOffset = 8192;

struct Fixture {
  test::MemoryArray array;
  std::unique_ptr<Volume> volume;
  AlignedBuffer reference;  // what the volume should hold

  Fixture(RaidLevel level, unsigned members, DeviceLimits limits = {})
      : array(members, kDataOffset + kRows * kChunk, limits) {
    auto geometry = Geometry::create(level, members, kChunk, kRows * kChunk);
    EXPECT_TRUE(geometry) << geometry.error().message;
    auto created = Volume::create(*geometry, array.members(), kDataOffset);
    EXPECT_TRUE(created) << created.error().message;
    volume = std::move(*created);
    reference = AlignedBuffer(volume->size());
    reference.zero();
  }

  void write(uint64_t offset, uint64_t length, uint64_t seed) {
    AlignedBuffer data = test::random_buffer(length, seed);
    auto r = volume->write(offset, data.span());
    ASSERT_TRUE(r) << r.error().message;
    std::memcpy(reference.data() + offset, data.data(), length);
  }

  void expect_contents() {
    AlignedBuffer back(volume->size());
    auto r = volume->read(0, back.span());
    ASSERT_TRUE(r) << r.error().message;
    for (uint64_t at = 0; at < volume->size(); at += 512) {
      ASSERT_EQ(std::memcmp(back.data() + at, reference.data() + at, 512), 0)
          << "volume sector at byte " << at << " differs";
    }
  }

  uint64_t inconsistent() {
    auto r = volume->count_inconsistent_stripes(0, volume->geometry().stripes());
    EXPECT_TRUE(r) << r.error().message;
    return r.value_or(~0ull);
  }
};

struct LevelCase {
  RaidLevel level;
  unsigned members;
};

const LevelCase kLevels[] = {{RaidLevel::raid0, 3},  {RaidLevel::raid1, 2},  {RaidLevel::raid1, 3},
                             {RaidLevel::raid10, 4}, {RaidLevel::raid10, 3}, {RaidLevel::raid5, 3},
                             {RaidLevel::raid5, 4},  {RaidLevel::raid5, 6},  {RaidLevel::raid6, 4},
                             {RaidLevel::raid6, 6}};

std::string name(const LevelCase& c) {
  return fmt::format("{}x{}", to_string(c.level), c.members);
}

// Random sector-aligned writes of every shape against a reference image; then every byte
// reads back and parity (or every mirror) is consistent.
TEST(Volume, RandomWritesReadBackAndStayConsistent) {
  for (const LevelCase& c : kLevels) {
    SCOPED_TRACE(name(c));
    Fixture f(c.level, c.members);
    f.write(0, f.volume->size(), 7);  // full-stripe everything first
    std::mt19937_64 rng(42);
    const uint64_t sectors = f.volume->size() / 512;
    for (int i = 0; i < 120; ++i) {
      const uint64_t start = rng() % sectors;
      const uint64_t count = 1 + rng() % std::min<uint64_t>(sectors - start, 200);
      f.write(start * 512, count * 512, rng());
    }
    f.write(512, 3 * 512, 8);
    f.expect_contents();
    EXPECT_EQ(f.inconsistent(), 0u);
  }
}

// Full stripes: parity comes from, and data goes out of, the caller's own buffers.
TEST(Volume, FullStripeWritesAreZeroCopy) {
  for (const LevelCase& c : {LevelCase{RaidLevel::raid5, 4}, LevelCase{RaidLevel::raid6, 6}}) {
    SCOPED_TRACE(name(c));
    Fixture f(c.level, c.members);
    for (auto& m : f.array.faulty) m->set_logging(true);
    const uint64_t length = 8 * f.volume->geometry().stripe_data_size();
    AlignedBuffer data = test::random_buffer(length, 3);
    ASSERT_TRUE(f.volume->write(0, data.span()));
    const auto stats = f.volume->stats();
    EXPECT_EQ(stats.full_stripe_writes, 8u);
    EXPECT_EQ(stats.full_stripe_bytes, length);
    EXPECT_EQ(stats.partial_stripe_writes, 0u);
    EXPECT_EQ(stats.prereads, 0u);
    const auto* begin = data.data();
    const auto* end = data.data() + length;
    uint64_t from_caller = 0, parity = 0;
    for (auto& m : f.array.faulty) {
      for (const LoggedIo& io : m->take_log()) {
        ASSERT_EQ(io.op, MemberOp::write);
        for (const iovec& v : io.iov) {
          const auto* p = static_cast<const std::byte*>(v.iov_base);
          if (p >= begin && p < end) {
            ASSERT_LE(p + v.iov_len, end);
            from_caller += v.iov_len;
          } else {
            parity += v.iov_len;
          }
        }
      }
    }
    EXPECT_EQ(from_caller, length) << "every data byte must be written from the caller's buffer";
    EXPECT_EQ(parity, 8u * f.volume->geometry().parity_chunks() * kChunk);
  }
}

// A sequential stream of full stripes: each member sees ascending, contiguous requests,
// merged up to its max_io and never crossing a max_io boundary.
TEST(Volume, SequentialStreamIsContiguousAndMergedPerMember) {
  DeviceLimits limits;
  limits.max_io = 64 * 1024;
  limits.optimal_io = 16 * 1024;
  Fixture f(RaidLevel::raid5, 4, limits);
  for (auto& m : f.array.faulty) m->set_logging(true);
  const uint64_t stripe = f.volume->geometry().stripe_data_size();
  for (uint64_t s = 0; s + 4 <= kRows; s += 4) f.write(s * stripe, 4 * stripe, s);
  for (auto& m : f.array.faulty) {
    SCOPED_TRACE(m->name());
    auto log = m->take_log();
    ASSERT_FALSE(log.empty());
    uint64_t expected_offset = kDataOffset;
    for (const LoggedIo& io : log) {
      EXPECT_EQ(io.op, MemberOp::write);
      EXPECT_EQ(io.offset, expected_offset) << "requests must be ascending and contiguous";
      EXPECT_LE(io.length, limits.max_io);
      EXPECT_EQ(io.offset / limits.max_io, (io.offset + io.length - 1) / limits.max_io)
          << "a request crosses a max_io boundary";
      expected_offset = io.offset + io.length;
    }
    EXPECT_EQ(expected_offset, kDataOffset + kRows * kChunk);
    // 4 chunks of 16 KiB per call, and data_offset 8 KiB: requests of at most 64 KiB,
    // cut at 64 KiB boundaries.
    EXPECT_LE(log.size(), kRows / 4 * 2);
  }
  f.expect_contents();
  EXPECT_EQ(f.inconsistent(), 0u);
}

// A scrub reads each member's range of a batch of stripes at once, cut as every Volume
// request is: none past the member's max_io nor across a multiple of it.
TEST(Volume, ScrubReadsKeepToTheMembersLimits) {
  DeviceLimits limits;
  limits.max_io = 64 * 1024;
  limits.optimal_io = 16 * 1024;
  Fixture f(RaidLevel::raid5, 4, limits);
  const uint64_t stripe = f.volume->geometry().stripe_data_size();
  f.write(0, kRows * stripe, 7);
  for (auto& m : f.array.faulty) m->set_logging(true);
  Volume::ScrubCounts counts;
  ASSERT_TRUE(f.volume->scrub_stripes(0, kRows, false, counts).has_value());
  EXPECT_EQ(counts.stripes, kRows);
  EXPECT_EQ(counts.mismatched, 0u);
  for (auto& m : f.array.faulty) {
    SCOPED_TRACE(m->name());
    uint64_t read = 0;
    for (const LoggedIo& io : m->take_log()) {
      EXPECT_EQ(io.op, MemberOp::read);
      EXPECT_LE(io.length, limits.max_io);
      EXPECT_EQ(io.offset / limits.max_io, (io.offset + io.length - 1) / limits.max_io)
          << "a request crosses a max_io boundary";
      read += io.length;
    }
    EXPECT_EQ(read, kRows * kChunk) << "every member's whole range is read once";
  }
}

TEST(Volume, ChoosesReadModifyWriteOrReconstructWriteByFewerReads) {
  {
    Fixture f(RaidLevel::raid5, 8);  // 7 data chunks: a small write reads less with RMW
    f.write(0, f.volume->size(), 1);
    f.write(4096, 4096, 2);
    auto s = f.volume->stats();
    EXPECT_EQ(s.rmw_writes, 1u);
    EXPECT_EQ(s.rcw_writes, 0u);
    EXPECT_EQ(s.preread_bytes, 2u * 4096);  // old data + old parity
    EXPECT_EQ(f.inconsistent(), 0u);
    f.expect_contents();
  }
  {
    Fixture f(RaidLevel::raid5, 3);  // 2 data chunks: rewriting one chunk reads the other
    f.write(0, f.volume->size(), 1);
    f.write(0, kChunk, 2);
    auto s = f.volume->stats();
    EXPECT_EQ(s.rcw_writes, 1u);
    EXPECT_EQ(s.rmw_writes, 0u);
    EXPECT_EQ(s.preread_bytes, uint64_t{kChunk});
    EXPECT_EQ(f.inconsistent(), 0u);
    f.expect_contents();
  }
  {
    Fixture f(RaidLevel::raid6, 7);  // RMW also updates Q
    f.write(0, f.volume->size(), 1);
    f.write(kChunk + 8192, 4096, 2);
    EXPECT_EQ(f.volume->stats().rmw_writes, 1u);
    EXPECT_EQ(f.inconsistent(), 0u);
    f.expect_contents();
  }
}

// Every member (RAID5) or pair of members (RAID6) missing: reads rebuild, writes go on.
TEST(Volume, DegradedReadsAndWritesForEveryMissingSet) {
  struct Case {
    RaidLevel level;
    unsigned members;
  };
  for (const Case c : {Case{RaidLevel::raid5, 4}, Case{RaidLevel::raid6, 5},
                       Case{RaidLevel::raid1, 3}, Case{RaidLevel::raid10, 4}}) {
    const unsigned n = c.members;
    for (unsigned a = 0; a < n; ++a) {
      for (unsigned b = a; b < n; ++b) {
        if (b != a && c.level != RaidLevel::raid6) continue;
        SCOPED_TRACE(fmt::format("{}x{} missing {},{}", to_string(c.level), n, a, b));
        Fixture f(c.level, n);
        f.write(0, f.volume->size(), a * 10 + b);
        f.volume->fail_member(a, Error{EIO, "test"});
        f.volume->fail_member(b, Error{EIO, "test"});
        ASSERT_FALSE(f.volume->failed());
        f.expect_contents();
        std::mt19937_64 rng(a * 100 + b);
        for (int i = 0; i < 30; ++i) {
          const uint64_t start = rng() % (f.volume->size() / 512 - 64);
          f.write(start * 512, (1 + rng() % 64) * 512, rng());
        }
        f.expect_contents();
      }
    }
  }
}

TEST(Volume, MemberFailureMidStreamKeepsDataAndTellsTheListener) {
  for (const LevelCase& c : {LevelCase{RaidLevel::raid5, 4}, LevelCase{RaidLevel::raid6, 5},
                             LevelCase{RaidLevel::raid1, 2}, LevelCase{RaidLevel::raid10, 4}}) {
    SCOPED_TRACE(name(c));
    Fixture f(c.level, c.members);
    std::atomic<int> heard{-1};
    f.volume->set_failure_listener([&](unsigned member, const Error&) {
      heard = member;
      f.volume->failure_recorded(member);
    });
    f.array.faulty[1]->fail_after(5);
    const uint64_t piece = 3 * 4096;
    for (uint64_t at = 0; at + piece <= f.volume->size(); at += piece) f.write(at, piece, at);
    EXPECT_EQ(heard.load(), 1);
    EXPECT_FALSE(f.volume->active(1));
    f.expect_contents();
  }
}

// Like md, a write that saw a member fail is acknowledged only once the failure is recorded.
// Memory members complete inside submit(), so "not called yet" is a fact, not a race.
TEST(Volume, WritesAreHeldUntilTheFailureIsRecorded) {
  Fixture f(RaidLevel::raid5, 4);
  std::vector<unsigned> heard;
  f.volume->set_failure_listener([&](unsigned member, const Error&) { heard.push_back(member); });
  f.array.faulty[2]->fail_range(MemberOp::write, {0, ~0ull});
  AlignedBuffer data = test::random_buffer(f.volume->geometry().stripe_data_size(), 1);
  std::optional<Result<void>> outcome;
  f.volume->write({{0, data.span()}}, [&](Result<void> r) { outcome = std::move(r); });
  ASSERT_EQ(heard, std::vector<unsigned>{2});
  EXPECT_FALSE(outcome.has_value()) << "acknowledged before the failure was recorded";
  std::optional<Result<void>> flushed;
  f.volume->flush([&](Result<void> r) { flushed = std::move(r); });
  EXPECT_FALSE(flushed.has_value());
  f.volume->failure_recorded(2);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_TRUE(*outcome);
  ASSERT_TRUE(flushed.has_value());
  EXPECT_TRUE(*flushed);
  std::memcpy(f.reference.data(), data.data(), data.size());
  f.expect_contents();
}

// Members absent from the start (nullptr) take no I/O and cost no redundancy twice.
TEST(Volume, MissingMembersFromTheStart) {
  for (const LevelCase& c : {LevelCase{RaidLevel::raid5, 4}, LevelCase{RaidLevel::raid6, 5},
                             LevelCase{RaidLevel::raid10, 4}}) {
    SCOPED_TRACE(name(c));
    test::MemoryArray array(c.members, kDataOffset + kRows * kChunk);
    auto geometry = Geometry::create(c.level, c.members, kChunk, kRows * kChunk);
    auto members = array.members();
    members[1] = nullptr;
    auto volume = Volume::create(*geometry, members, kDataOffset);
    ASSERT_TRUE(volume) << volume.error().message;
    AlignedBuffer data = test::random_buffer((*volume)->size(), 4);
    ASSERT_TRUE((*volume)->write(0, data.span()));
    AlignedBuffer part = test::random_buffer(8192, 5);
    ASSERT_TRUE((*volume)->write(4096, part.span()));
    std::memcpy(data.data() + 4096, part.data(), part.size());
    AlignedBuffer back((*volume)->size());
    ASSERT_TRUE((*volume)->read(0, back.span()));
    EXPECT_EQ(std::memcmp(back.data(), data.data(), data.size()), 0);
    EXPECT_TRUE((*volume)->flush());
  }
}

TEST(Volume, ReadErrorIsServedFromRedundancy) {
  Fixture f(RaidLevel::raid6, 5);
  f.write(0, f.volume->size(), 5);
  f.array.faulty[0]->fail_range(MemberOp::read, {0, ~0ull});
  f.array.faulty[3]->fail_range(MemberOp::read,
                                {kDataOffset + 4 * kChunk, kDataOffset + 5 * kChunk});
  f.expect_contents();
  EXPECT_FALSE(f.volume->active(0));
  EXPECT_FALSE(f.volume->active(3));
  EXPECT_GT(f.volume->stats().degraded_reads, 0u);
}

// A read within one chunk goes straight to its member (Volume::read_one); when that member
// fails it, the read is still answered, from parity or the other copy, and the member is
// taken out, at every level with redundancy.
TEST(Volume, SmallReadErrorIsServedFromRedundancy) {
  const std::pair<RaidLevel, unsigned> levels[] = {
      {RaidLevel::raid5, 4}, {RaidLevel::raid6, 5}, {RaidLevel::raid1, 2}, {RaidLevel::raid10, 4}};
  for (auto [level, count] : levels) {
    SCOPED_TRACE(static_cast<int>(level));
    Fixture f(level, count);
    f.write(0, f.volume->size(), 7);
    f.array.faulty[0]->fail_range(MemberOp::read, {0, ~0ull});
    const uint64_t before = f.volume->stats().member_read_ios;
    for (uint64_t offset = 0; offset < 4 * kChunk; offset += 4096) {
      AlignedBuffer back(4096);
      auto r = f.volume->read(offset, back.span());
      ASSERT_TRUE(r) << "volume byte " << offset << ": " << r.error().message;
      ASSERT_EQ(std::memcmp(back.data(), f.reference.data() + offset, 4096), 0)
          << "volume byte " << offset;
    }
    EXPECT_FALSE(f.volume->active(0));
    EXPECT_GT(f.volume->stats().member_read_ios, before);
  }
}

// A read within one chunk takes the direct path, at every level; one that crosses a chunk
// boundary, or asks for several pieces, takes the general one. Both read the right bytes.
TEST(Volume, ReadsWithinOneChunkGoStraightToTheirMember) {
  const std::pair<RaidLevel, unsigned> levels[] = {{RaidLevel::raid0, 3},
                                                   {RaidLevel::raid5, 4},
                                                   {RaidLevel::raid6, 5},
                                                   {RaidLevel::raid1, 2},
                                                   {RaidLevel::raid10, 4}};
  for (auto [level, count] : levels) {
    SCOPED_TRACE(static_cast<int>(level));
    Fixture f(level, count);
    f.write(0, f.volume->size(), 3);
    const auto check = [&](uint64_t offset, uint64_t length, uint64_t direct) {
      const uint64_t before = f.volume->stats().direct_reads;
      AlignedBuffer back(length);
      auto r = f.volume->read(offset, back.span());
      ASSERT_TRUE(r) << r.error().message;
      EXPECT_EQ(std::memcmp(back.data(), f.reference.data() + offset, length), 0);
      EXPECT_EQ(f.volume->stats().direct_reads - before, direct)
          << "volume byte " << offset << ", " << length << " bytes";
    };
    check(0, 4096, 1);
    check(kChunk + 8192, 4096, 1);
    check(2 * kChunk, kChunk, 1);
    check(kChunk - 4096, 8192, 0);
    check(0, 2 * kChunk, 0);
  }
}

TEST(Volume, TooManyFailuresGiveEio) {
  Fixture f(RaidLevel::raid5, 4);
  f.write(0, f.volume->size(), 5);
  f.volume->fail_member(0, Error{EIO, "test"});
  f.array.faulty[2]->fail_range(MemberOp::write, {0, ~0ull});
  AlignedBuffer data = test::random_buffer(f.volume->size(), 6);
  auto w = f.volume->write(0, data.span());
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().code, EIO);
  EXPECT_TRUE(f.volume->failed());
  AlignedBuffer back(4096);
  EXPECT_FALSE(f.volume->read(0, back.span()));

  Fixture r0(RaidLevel::raid0, 2);
  r0.array.faulty[1]->fail_range(MemberOp::read, {0, ~0ull});
  AlignedBuffer all(r0.volume->size());
  auto r = r0.volume->read(0, all.span());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, EIO);
}

TEST(Volume, RejectsMisalignedAndOutOfRangeIo) {
  Fixture f(RaidLevel::raid5, 4);
  AlignedBuffer data(8192);
  auto a = f.volume->write(100, data.span().subspan(0, 512));
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().code, EINVAL);
  EXPECT_FALSE(f.volume->write(0, data.span().subspan(0, 100)));
  EXPECT_FALSE(f.volume->write(0, data.span().subspan(8, 512)));
  auto past = f.volume->read(f.volume->size() - 512, data.span().subspan(0, 1024));
  ASSERT_FALSE(past);
  EXPECT_NE(past.error().message.find("past the end"), std::string::npos);
}

// Overlapping writes from many threads never interleave inside a stripe: parity stays
// consistent and every sector holds one of the versions written to it.
TEST(Volume, ConcurrentOverlappingWritesStayConsistent) {
  for (const LevelCase& c : {LevelCase{RaidLevel::raid5, 4}, LevelCase{RaidLevel::raid6, 6},
                             LevelCase{RaidLevel::raid1, 2}}) {
    SCOPED_TRACE(name(c));
    Fixture f(c.level, c.members);
    const uint64_t span = 4 * f.volume->geometry().stripe_data_size();
    constexpr int kThreads = 4;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937_64 rng(t);
        AlignedBuffer data(span);
        for (int i = 0; i < 150; ++i) {
          const uint64_t start = rng() % (span / 512);
          const uint64_t count = 1 + rng() % std::min<uint64_t>(span / 512 - start, 96);
          // Each sector is stamped with its writer so readers can tell versions apart.
          for (uint64_t s = 0; s < count; ++s) {
            std::memset(data.data() + s * 512, t + 1, 512);
          }
          ASSERT_TRUE(f.volume->write(start * 512, data.span().subspan(0, count * 512)));
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(f.inconsistent(), 0u);
    AlignedBuffer back(span);
    ASSERT_TRUE(f.volume->read(0, back.span()));
    for (uint64_t s = 0; s < span / 512; ++s) {
      const auto first = static_cast<uint8_t>(back.data()[s * 512]);
      EXPECT_LE(first, kThreads);
      for (int b = 1; b < 512; ++b) {
        ASSERT_EQ(static_cast<uint8_t>(back.data()[s * 512 + b]), first) << "torn sector " << s;
      }
    }
  }
}

TEST(Volume, RefusesTooManyMissingMembersAtCreation) {
  test::MemoryArray array(4, kDataOffset + kRows * kChunk);
  auto geometry = Geometry::create(RaidLevel::raid5, 4, kChunk, kRows * kChunk);
  auto members = array.members();
  members[0] = nullptr;
  EXPECT_TRUE(Volume::create(*geometry, members, kDataOffset));
  members[2] = nullptr;
  auto refused = Volume::create(*geometry, members, kDataOffset);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("2 of 4 members missing"), std::string::npos);
}

}  // namespace
}  // namespace stripefs
