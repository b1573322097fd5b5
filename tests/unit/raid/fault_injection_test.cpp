// Failure and race cases found in review: each states the correct behaviour.
#include <gtest/gtest.h>

#include <deque>
#include <mutex>

#include "raid/array.hpp"
#include "raid/volume.hpp"
#include "unit/raid/test_util.hpp"

namespace stripefs {
namespace {

constexpr uint32_t kChunk = 16384;
constexpr uint64_t kRows = 8;
constexpr uint64_t kOff = 8192;

// Holds requests while `hold` is set; release() forwards them.
struct GateMember final : Member {
  Member& inner;
  std::mutex m;
  bool hold = false;
  std::deque<MemberRequest> held;
  explicit GateMember(Member& in) : Member("gate", in.size(), in.limits()), inner(in) {}
  void submit(MemberRequest r) override {
    {
      std::lock_guard l(m);
      if (hold) {
        held.push_back(std::move(r));
        return;
      }
    }
    inner.submit(std::move(r));
  }
  void release() {
    std::deque<MemberRequest> q;
    {
      std::lock_guard l(m);
      hold = false;
      q.swap(held);
    }
    for (auto& r : q) inner.submit(std::move(r));
  }
};

std::unique_ptr<Volume> make(RaidLevel level, std::vector<Member*> members) {
  auto g = Geometry::create(level, static_cast<unsigned>(members.size()), kChunk, kRows * kChunk);
  auto v = Volume::create(*g, members, kOff);
  EXPECT_TRUE(v) << v.error().message;
  return std::move(*v);
}

// 1. A member taken out of service while a partial-stripe write's prereads are in flight:
//    finish_partial_stripe "recovers" the missing chunk from slots that were never read.
TEST(FaultInjection, MemberFailingDuringPartialWritePrereadCorruptsUntouchedChunk) {
  test::MemoryArray media(3, kOff + kRows * kChunk);
  std::vector<std::unique_ptr<GateMember>> gates;
  std::vector<Member*> ms;
  for (auto& f : media.faulty) {
    gates.push_back(std::make_unique<GateMember>(*f));
    ms.push_back(gates.back().get());
  }
  auto v = make(RaidLevel::raid5, ms);
  AlignedBuffer image = test::random_buffer(v->geometry().stripe_data_size(), 1);
  ASSERT_TRUE(v->write(0, image.span()));  // full stripe 0
  const unsigned d1 = v->geometry().locate(0, 1).member;
  // 4 KiB into data chunk 0: RCW, which reads only chunk 1's rows [0,4K).
  AlignedBuffer part = test::random_buffer(4096, 2);
  gates[d1]->hold = true;
  std::optional<Result<void>> out;
  v->write({{0, part.span()}}, [&](Result<void> r) { out = r; });
  ASSERT_FALSE(out);
  v->fail_member(d1, Error{EIO, "operator"});  // e.g. stripefsctl fail, or another job's EIO
  gates[d1]->release();
  ASSERT_TRUE(out && *out);
  std::memcpy(image.data(), part.data(), part.size());
  AlignedBuffer back(image.size());
  ASSERT_TRUE(v->read(0, back.span()));  // chunk 1 now rebuilt from P
  EXPECT_EQ(std::memcmp(back.data() + kChunk, image.data() + kChunk, 4096), 0)
      << "untouched data chunk 1 was lost (parity computed from an unread scratch slot)";
}

// 2. Overlapping pieces in one write: bytes add up to a stripe, so it is taken as a full
//    stripe; generate_segmented then walks past chunk 1's (empty) segment list.
TEST(FaultInjection, OverlappingPiecesAreTakenForAFullStripe) {
  test::MemoryArray media(3, kOff + kRows * kChunk);
  auto v = make(RaidLevel::raid5, media.members());
  AlignedBuffer a = test::random_buffer(kChunk, 3), b = test::random_buffer(kChunk, 4);
  std::optional<Result<void>> out;
  v->write({{0, a.span()}, {0, b.span()}}, [&](Result<void> r) { out = r; });
  ASSERT_TRUE(out);
  EXPECT_FALSE(*out) << "overlapping pieces should be refused (EINVAL)";
}

// 2b. Overlap inside a partial stripe: RMW applies the delta twice -> parity wrong.
TEST(FaultInjection, OverlappingPiecesInPartialStripeBreakParity) {
  test::MemoryArray media(4, kOff + kRows * kChunk);
  auto v = make(RaidLevel::raid5, media.members());
  AlignedBuffer img = test::random_buffer(v->geometry().stripe_data_size(), 5);
  ASSERT_TRUE(v->write(0, img.span()));
  AlignedBuffer a = test::random_buffer(4096, 6), b = test::random_buffer(4096, 7);
  std::optional<Result<void>> out;
  v->write({{0, a.span()}, {0, b.span()}}, [&](Result<void> r) { out = r; });
  ASSERT_TRUE(out);
  if (*out) {
    EXPECT_EQ(*v->count_inconsistent_stripes(0, 1), 0u) << "accepted, but parity is now wrong";
  }
}

// 3. RAID0 with a failed member: a write that lands only on it plans no I/O, remaining=0,
//    the callback never runs and the stripe lock is never released.
TEST(FaultInjection, WriteWithNoLiveTargetNeverCompletes) {
  test::MemoryArray media(2, kOff + kRows * kChunk);
  auto v = make(RaidLevel::raid0, media.members());
  v->fail_member(1, Error{EIO, "gone"});
  AlignedBuffer a = test::random_buffer(4096, 8);
  std::optional<Result<void>> out;
  v->write({{kChunk, a.span()}}, [&](Result<void> r) { out = r; });  // chunk 1 -> member 1
  EXPECT_TRUE(out.has_value()) << "lost completion (memory members complete inline)";
}

// 3b. Flush with every member out of service never completes.
TEST(FaultInjection, FlushWithNoActiveMemberNeverCompletes) {
  test::MemoryArray media(2, kOff + kRows * kChunk);
  auto v = make(RaidLevel::raid1, media.members());
  v->fail_member(0, Error{EIO, "gone"});
  v->fail_member(1, Error{EIO, "gone"});
  std::optional<Result<void>> out;
  v->flush([&](Result<void> r) { out = r; });
  EXPECT_TRUE(out.has_value()) << "lost completion";
}

// 4. close() reports success though a survivor's superblock write failed (or power was
//    cut between the superblock writes): the next open refuses an intact array.
// Members that cannot take the clean-shutdown record are failed, close() says so, and the
// array refuses to start without them; a forced assembly (md's --force) brings them back.
TEST(FaultInjection, SuperblockWriteFailuresFailTheMemberAndForceRecovers) {
  test::MemoryArray media(3, 8 << 20);
  ArrayOptions o;
  o.chunk_size = 64 * 1024;
  ASSERT_TRUE(create_array(media.members(), o));
  AlignedBuffer data = test::random_buffer(1 << 20, 21);
  {
    auto a = Array::open(media.members());
    ASSERT_TRUE(a);
    ASSERT_TRUE((*a)->volume().write(0, data.span()));
    media.faulty[1]->fail_range(MemberOp::write, {4096, 8192});
    media.faulty[2]->fail_range(MemberOp::write, {4096, 8192});
    EXPECT_FALSE((*a)->close()) << "close() claimed a clean shutdown";
  }
  media.faulty[1]->heal();
  media.faulty[2]->heal();
  auto refused = Array::open(media.members());
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("recorded as failed"), std::string::npos)
      << refused.error().message;
  OpenOptions force;
  force.force = true;
  auto forced = Array::open(media.members(), force);
  ASSERT_TRUE(forced) << forced.error().message;
  // As mdadm --force: only as many members as the array needs to start (one of the two).
  EXPECT_EQ((*forced)->volume().missing_members(), 1u);
  ASSERT_FALSE((*forced)->notes().empty());
  EXPECT_NE((*forced)->notes()[0].find("forced in"), std::string::npos) << (*forced)->notes()[0];
  EXPECT_EQ((*forced)->wait_resync().total, 0u) << "degraded: no parity to check";
  AlignedBuffer back(data.size());
  ASSERT_TRUE((*forced)->volume().read(0, back.span()));
  EXPECT_EQ(std::memcmp(back.data(), data.data(), data.size()), 0);
}

TEST(FaultInjection, FaultyCacheOverlaysStaleDataOverNewerFuaWrite) {
  MemoryMember mem("m", 1 << 20);
  FaultyMember f(mem);
  f.set_volatile_cache(true);
  AlignedBuffer old_data = test::random_buffer(4096, 9), new_data = test::random_buffer(4096, 10);
  ASSERT_TRUE(member_write(f, 0, old_data.span()));
  ASSERT_TRUE(member_write(f, 0, new_data.span(), /*fua=*/true));
  AlignedBuffer back(4096);
  ASSERT_TRUE(member_read(f, 0, back.span()));
  EXPECT_EQ(std::memcmp(back.data(), new_data.data(), 4096), 0)
      << "read returns the older cached write";
  ASSERT_TRUE(member_flush(f));
  ASSERT_TRUE(member_read(mem, 0, back.span()));
  EXPECT_EQ(std::memcmp(back.data(), new_data.data(), 4096), 0)
      << "flush wrote the older data back over the FUA write";
}

}  // namespace
}  // namespace stripefs

// --- appended experiments ---

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "raid/file_member.hpp"
#include "raid/io_engine.hpp"

namespace stripefs {
namespace {

// 6. A region registered with the engine is freed (e.g. a Volume's parity arena when the
//    array is closed) and the address range is reused: requests inside it go out as fixed
//    I/O against the OLD pinned pages. Silent corruption; there is no unregister.
TEST(FaultInjection, UnregisteredRegionAtAReusedAddressIsNotUsed) {
  auto engine = IoEngine::create(16);
  ASSERT_TRUE(engine);
  char path[] = "/dev/shm/review-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 1 << 20), 0);
  ::close(fd);
  auto m = FileMember::open(path, **engine, FileMember::InMemory::ring);
  ASSERT_TRUE(m);
  const size_t len = 1 << 20;
  void* a = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  std::memset(a, 0xAA, len);
  {
    auto registration = (*engine)->register_buffer(a, len);
    ASSERT_TRUE(registration);
  }  // the owner goes away (Volume destroyed) and unregisters; the engine lives on
  munmap(a, len);
  void* b = mmap(a, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
                 -1, 0);
  ASSERT_EQ(a, b) << "could not reuse the address";
  std::memset(b, 0x55, len);  // a new, unrelated buffer at the same address
  ASSERT_TRUE(member_write(**m, 0, {static_cast<std::byte*>(b), 65536}));
  AlignedBuffer back(65536);
  ASSERT_TRUE(member_read(**m, 0, back.span()));
  EXPECT_EQ(back.data()[0], std::byte{0x55}) << "the file got the freed region's old bytes";
  m->reset();
  munmap(b, len);
  unlink(path);
}

// Two mirror halves each run alone: neither history may win silently, whatever the order.
TEST(FaultInjection, SplitBrainIsRefused) {
  test::MemoryArray media(2, 8 << 20);
  ArrayOptions o;
  o.level = RaidLevel::raid1;
  o.chunk_size = 64 * 1024;
  ASSERT_TRUE(create_array(media.members(), o));
  for (unsigned alone : {0u, 1u}) {
    Member* only[] = {media.faulty[alone].get()};
    auto a = Array::open(only);
    ASSERT_TRUE(a) << a.error().message;
    AlignedBuffer d = test::random_buffer(4096, 100 + alone);
    ASSERT_TRUE((*a)->volume().write(0, d.span()));
    ASSERT_TRUE((*a)->close());
  }
  Member* ab[] = {media.faulty[0].get(), media.faulty[1].get()};
  Member* ba[] = {media.faulty[1].get(), media.faulty[0].get()};
  for (auto members : {std::span<Member* const>(ab), std::span<Member* const>(ba)}) {
    auto refused = assemble(members);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find("each run without the other"), std::string::npos)
        << refused.error().message;
  }
  Member* only[] = {media.faulty[1].get()};
  EXPECT_TRUE(assemble(only)) << "the operator picks the half to keep";
}

TEST(FaultInjection, QueuedWritesOnOneStripeRecurseOnRelease) {
  test::MemoryArray media(3, kOff + kRows * kChunk);
  auto v = make(RaidLevel::raid5, media.members());
  v->set_failure_listener([](unsigned, const Error&) {});  // records later
  media.faulty[2]->fail_range(MemberOp::write, {0, ~0ull});
  AlignedBuffer d = test::random_buffer(4096, 1);
  std::atomic<int> done{0};
  v->write({{0, d.span()}}, [&](Result<void>) { ++done; });  // member 2 fails; held
  const int n = 3000;
  for (int i = 0; i < n; ++i) v->write({{0, d.span()}}, [&](Result<void>) { ++done; });
  v->failure_recorded(2);
  EXPECT_EQ(done.load(), n + 1);
}
}  // namespace
}  // namespace stripefs
