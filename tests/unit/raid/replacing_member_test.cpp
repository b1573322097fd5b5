// The ReplacingMember on its own: what it mirrors, and the two races its copy must win
// (a write in flight over a piece when the copy reaches it, and a write arriving while the
// piece is being copied), made certain with slow devices.
#include "raid/replacing_member.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <future>
#include <thread>
#include <vector>

#include "unit/raid/test_util.hpp"

namespace stripefs {
namespace {

using std::chrono::milliseconds;

constexpr uint64_t kSize = 1 << 20;
constexpr uint64_t kBegin = 8192;

struct Devices {
  MemoryMember old_medium{"old", kSize};
  MemoryMember new_medium{"new", kSize};
  FaultyMember old{old_medium};
  FaultyMember fresh{new_medium};
  ReplacingMember replacing{old, fresh, kBegin, kSize};

  Devices() {
    AlignedBuffer fill = test::random_buffer(kSize, 1);
    std::memcpy(old_medium.contents().data(), fill.data(), kSize);
  }
  // Starts a write through the wrapper; the future is its result.
  std::future<int64_t> write(uint64_t offset, const AlignedBuffer& data) {
    auto done = std::make_shared<std::promise<int64_t>>();
    auto result = done->get_future();
    MemberRequest request;
    request.op = MemberOp::write;
    request.offset = offset;
    request.iov = {{data.data(), data.size()}};
    request.done = [done](int64_t r) { done->set_value(r); };
    replacing.submit(std::move(request));
    return result;
  }
  bool same(uint64_t offset, uint64_t length) {
    return std::memcmp(old_medium.contents().data() + offset, new_medium.contents().data() + offset,
                       length) == 0;
  }
};

TEST(ReplacingMember, MirrorsOnlyWhatIsCopiedAndCopiesTheRest) {
  Devices d;
  AlignedBuffer early = test::random_buffer(4096, 2);
  EXPECT_EQ(d.write(kSize / 2, early).get(), 4096);
  EXPECT_FALSE(d.same(kSize / 2, 4096)) << "not copied yet: the old device only";
  ASSERT_TRUE(d.replacing.copy(kSize / 2 + 4096 - kBegin));
  EXPECT_EQ(d.replacing.copied(), kSize / 2 + 4096);
  EXPECT_TRUE(d.same(kBegin, kSize / 2 + 4096 - kBegin));
  AlignedBuffer late = test::random_buffer(4096, 3);
  EXPECT_EQ(d.write(kBegin, late).get(), 4096);
  EXPECT_TRUE(d.same(kBegin, 4096)) << "copied: mirrored";
  ASSERT_TRUE(d.replacing.copy(kSize));
  EXPECT_TRUE(d.replacing.complete());
  EXPECT_TRUE(d.same(kBegin, kSize - kBegin));
  EXPECT_FALSE(d.same(0, kBegin)) << "the superblock area is each device's own";
}

// A slow write over the first piece is in flight when the copy starts: the copy waits for
// it, or it would copy the bytes from before it.
TEST(ReplacingMember, TheCopyWaitsForWritesInFlightOverItsPiece) {
  Devices d;
  d.old.set_latency(std::chrono::milliseconds(200));
  AlignedBuffer data = test::random_buffer(65536, 4);
  auto written = d.write(kBegin, data);
  d.old.set_latency(std::chrono::microseconds(0));
  ASSERT_TRUE(d.replacing.copy(kSize));
  EXPECT_EQ(written.get(), 65536);
  EXPECT_EQ(std::memcmp(d.new_medium.contents().data() + kBegin, data.data(), data.size()), 0);
}

// A write over the piece being copied arrives while the copy writes it (slowly): it waits
// until the piece is copied and then goes to both, or the copy would overwrite it with the
// bytes from before.
TEST(ReplacingMember, WritesOverThePieceBeingCopiedWaitForIt) {
  Devices d;
  d.fresh.set_latency(std::chrono::milliseconds(200));
  std::thread copy([&] { ASSERT_TRUE(d.replacing.copy(65536)); });
  std::this_thread::sleep_for(milliseconds(50));
  AlignedBuffer data = test::random_buffer(4096, 5);
  auto written = d.write(kBegin + 8192, data);
  copy.join();
  d.fresh.set_latency(std::chrono::microseconds(0));
  EXPECT_EQ(written.get(), 4096);
  EXPECT_EQ(std::memcmp(d.new_medium.contents().data() + kBegin + 8192, data.data(), 4096), 0);
  EXPECT_TRUE(d.same(kBegin, 65536));
}

// Pipelined: the next piece is read from the old device while this one is written to the
// replacement. Here the first piece's write and the second piece's read are held: both are in
// flight together, nothing counts as copied yet, and a write over the second piece waits for
// its copy, then reaches both devices.
TEST(ReplacingMember, TheNextPieceIsReadWhileThisOneIsWritten) {
  constexpr uint64_t size = 12 << 20, piece = 4 << 20;
  MemoryMember old_medium{"old", size};
  MemoryMember new_medium{"new", size};
  FaultyMember old{old_medium};
  FaultyMember fresh{new_medium};
  AlignedBuffer fill = test::random_buffer(size, 4);
  std::memcpy(old_medium.contents().data(), fill.data(), size);
  ReplacingMember replacing{old, fresh, kBegin, size};
  fresh.hold(MemberOp::write, {kBegin, kBegin + 1});
  old.hold(MemberOp::read, {kBegin + piece, kBegin + piece + 1});
  auto copying = std::async(std::launch::async, [&] { return replacing.copy(size); });
  for (int i = 0; i < 10000 && (fresh.held() == 0 || old.held() == 0); ++i) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  EXPECT_EQ(fresh.held(), 1u) << "the first piece's write";
  EXPECT_EQ(old.held(), 1u) << "the second piece was not read while the first was written";
  EXPECT_EQ(replacing.copied(), kBegin);
  AlignedBuffer data = test::random_buffer(4096, 5);
  auto written = std::make_shared<std::promise<int64_t>>();
  auto result = written->get_future();
  MemberRequest request;
  request.op = MemberOp::write;
  request.offset = kBegin + piece + 8192;
  request.iov = {{data.data(), data.size()}};
  request.done = [written](int64_t r) { written->set_value(r); };
  replacing.submit(std::move(request));
  EXPECT_EQ(result.wait_for(milliseconds(50)), std::future_status::timeout)
      << "a write over a piece being copied went on";
  old.release_held();
  fresh.release_held();
  ASSERT_TRUE(copying.get());
  EXPECT_EQ(result.get(), 4096);
  EXPECT_EQ(replacing.copied(), size);
  EXPECT_EQ(std::memcmp(old_medium.contents().data() + kBegin,
                        new_medium.contents().data() + kBegin, size - kBegin),
            0);
  EXPECT_EQ(std::memcmp(new_medium.contents().data() + kBegin + piece + 8192, data.data(), 4096),
            0);
}

// Asked to stop after a piece, the copy stops there: the next piece, already being read, is
// not written, and writes over it go on.
TEST(ReplacingMember, ACopyToldToStopEndsAfterThePieceUnderWay) {
  constexpr uint64_t size = 12 << 20, piece = 4 << 20;
  MemoryMember old_medium{"old", size};
  MemoryMember new_medium{"new", size};
  ReplacingMember replacing{old_medium, new_medium, kBegin, size};
  std::vector<uint64_t> seen;
  ASSERT_TRUE(replacing.copy(size, [&](uint64_t copied) {
    seen.push_back(copied);
    return false;
  }));
  EXPECT_EQ(seen, std::vector<uint64_t>{kBegin + piece});
  EXPECT_EQ(replacing.copied(), kBegin + piece);
  EXPECT_EQ(new_medium.counters().written_bytes, piece);
  ASSERT_TRUE(replacing.copy(size));  // resumes where it stopped
  EXPECT_EQ(replacing.copied(), size);
}

TEST(ReplacingMember, AFailingReplacementGetsNothingMoreAndTheCallerNeverNotices) {
  Devices d;
  ASSERT_TRUE(d.replacing.copy(65536));
  d.fresh.fail_after(0);
  AlignedBuffer data = test::random_buffer(4096, 6);
  EXPECT_EQ(d.write(kBegin, data).get(), 4096) << "the old device's result";
  ASSERT_TRUE(d.replacing.replacement_failed());
  EXPECT_FALSE(d.replacing.copy(65536));
  EXPECT_FALSE(d.replacing.old_failed());
  const uint64_t seen = d.fresh.requests_seen();
  EXPECT_EQ(d.write(kBegin, data).get(), 4096);
  EXPECT_EQ(d.fresh.requests_seen(), seen);
}

}  // namespace
}  // namespace stripefs
