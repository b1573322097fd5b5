// The real I/O path: FileMember on files, driven by an IoEngine (io_uring).
#include "raid/file_member.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <future>

#include "raid/ring_buffers.hpp"
#include "raid/volume.hpp"
#include "unit/raid/test_util.hpp"

namespace stripefs {
namespace {

class FileMemberTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Not tmpfs: files there skip O_DIRECT and the ring (see InMemoryFilesSkipTheRing).
    char pattern[] = "/var/tmp/stripefs-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    auto engine = IoEngine::create(64);
    ASSERT_TRUE(engine) << engine.error().message;
    engine_ = std::move(*engine);
  }
  void TearDown() override {
    members_.clear();
    engine_.reset();
    std::filesystem::remove_all(dir_);
  }

  FileMember& make(uint64_t size) {
    const std::string path = dir_ + "/m" + std::to_string(members_.size());
    int fd = ::open(path.c_str(), O_CREAT | O_RDWR, 0600);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(size)), 0);
    ::close(fd);
    auto member = FileMember::open(path, *engine_);
    EXPECT_TRUE(member) << member.error().message;
    members_.push_back(std::move(*member));
    return *members_.back();
  }

  std::string dir_;
  std::unique_ptr<IoEngine> engine_;
  std::vector<std::unique_ptr<FileMember>> members_;
};

TEST_F(FileMemberTest, OpensFilesWithDirectIoAndDiscoversLimits) {
  FileMember& m = make(4 << 20);
  EXPECT_EQ(m.size(), 4u << 20);
  EXPECT_TRUE(m.direct_io());
  EXPECT_FALSE(m.is_block_device());
  EXPECT_GE(m.limits().logical_block, 512u);
  EXPECT_GE(m.limits().physical_block, m.limits().logical_block);
}

TEST_F(FileMemberTest, RejectsWhatIsNotAMember) {
  auto missing = FileMember::open(dir_ + "/absent", *engine_);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ENOENT);
  EXPECT_NE(missing.error().message.find(dir_ + "/absent"), std::string::npos);
  auto directory = FileMember::open(dir_, *engine_);
  ASSERT_FALSE(directory);
  EXPECT_NE(directory.error().message.find("not a block device or regular file"),
            std::string::npos);
}

TEST_F(FileMemberTest, ReadWriteFlushRoundTrip) {
  FileMember& m = make(4 << 20);
  AlignedBuffer data = test::random_buffer(256 * 1024, 1);
  ASSERT_TRUE(member_write(m, 8192, data.span()));
  ASSERT_TRUE(member_write(m, 1 << 20, data.span(), /*fua=*/true));
  ASSERT_TRUE(member_flush(m));
  AlignedBuffer back(data.size());
  ASSERT_TRUE(member_read(m, 8192, back.span()));
  EXPECT_EQ(std::memcmp(back.data(), data.data(), data.size()), 0);
  ASSERT_TRUE(member_read(m, 1 << 20, back.span()));
  EXPECT_EQ(std::memcmp(back.data(), data.data(), data.size()), 0);
  // Past the end: a short read, reported as an error naming the member.
  auto past = member_read(m, (4 << 20) - 4096, back.span());
  ASSERT_FALSE(past);
  EXPECT_NE(past.error().message.find("short read"), std::string::npos);
}

TEST_F(FileMemberTest, InMemoryFilesSkipTheRing) {
  char pattern[] = "/dev/shm/stripefs-test-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const std::string dir = pattern;
  const std::string path = dir + "/m";
  int fd = ::open(path.c_str(), O_CREAT | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 4 << 20), 0);
  ::close(fd);
  {
    auto m = FileMember::open(path, *engine_);
    ASSERT_TRUE(m) << m.error().message;
    EXPECT_FALSE((*m)->direct_io());
    const uint64_t before = engine_->stats().requests;
    AlignedBuffer data = test::random_buffer(64 * 1024, 3);
    // Scattered iovecs, FUA, flush: all done on this thread, none through the ring.
    ASSERT_TRUE(member_write(**m, 4096, data.span(), /*fua=*/true));
    ASSERT_TRUE(member_flush(**m));
    AlignedBuffer back(data.size());
    ASSERT_TRUE(member_read(**m, 4096, back.span()));
    EXPECT_EQ(std::memcmp(back.data(), data.data(), data.size()), 0);
    EXPECT_EQ(engine_->stats().requests, before);
    auto past = member_read(**m, (4 << 20) - 4096, back.span());
    ASSERT_FALSE(past);
    EXPECT_NE(past.error().message.find("short read"), std::string::npos);
  }
  std::filesystem::remove_all(dir);
}

TEST_F(FileMemberTest, RegisteredBuffersGoOutAsFixedRequests) {
  FileMember& m = make(4 << 20);
  AlignedBuffer arena = test::random_buffer(1 << 20, 2);
  auto registration = engine_->register_buffer(arena.data(), arena.size());
  ASSERT_TRUE(registration);
  const auto before = engine_->stats().fixed_requests;
  ASSERT_TRUE(member_write(m, 0, arena.span().subspan(4096, 65536)));
  AlignedBuffer outside(65536);
  ASSERT_TRUE(member_read(m, 0, outside.span()));
  EXPECT_EQ(std::memcmp(outside.data(), arena.data() + 4096, 65536), 0);
  EXPECT_EQ(engine_->stats().fixed_requests, before + 1) << "only the arena write is fixed";
}

// File data in the DataArena (the pool's buffers) needs no register_buffer: the engine
// registers the arena's chunks itself. One segment goes as READ/WRITE_FIXED; several inside
// one chunk (a member's run merged from one user buffer) as READV/WRITEV_FIXED where the
// kernel has them. The bytes must land where the segments say: that checks the opcodes too.
TEST_F(FileMemberTest, ArenaBuffersGoOutAsFixedRequestsVectoredToo) {
  FileMember& m = make(4 << 20);
  DataArena::shared().allow(8 << 20);
  AlignedBuffer data = AlignedBuffer::from_arena(256 * 1024);
  ASSERT_EQ(data.size(), 256u * 1024) << "the arena must have room";
  ASSERT_TRUE(data.in_arena());
  AlignedBuffer pattern = test::random_buffer(data.size(), 5);
  std::memcpy(data.data(), pattern.data(), data.size());
  const auto start = engine_->stats().fixed_requests;
  ASSERT_TRUE(member_write(m, 0, data.span()));
  EXPECT_EQ(engine_->stats().fixed_requests, start + 1) << "one segment in the arena";

  // Two segments of one arena buffer, in swapped order: a vectored request.
  auto run = [&](MemberOp op, std::byte* first, std::byte* second) {
    MemberRequest r;
    r.op = op;
    r.offset = 1 << 20;
    r.iov = {{first, 65536}, {second, 65536}};
    std::promise<int64_t> done;
    r.done = [&](int64_t res) { done.set_value(res); };
    m.submit(std::move(r));
    return done.get_future().get();
  };
  const auto before_vectored = engine_->stats().fixed_requests;
  ASSERT_EQ(run(MemberOp::write, data.data() + 131072, data.data()), 131072);
  AlignedBuffer back = AlignedBuffer::from_arena(256 * 1024);
  ASSERT_TRUE(back.in_arena());
  ASSERT_EQ(run(MemberOp::read, back.data(), back.data() + 65536), 131072);
  EXPECT_EQ(std::memcmp(back.data(), pattern.data() + 131072, 65536), 0);
  EXPECT_EQ(std::memcmp(back.data() + 65536, pattern.data(), 65536), 0);
  io_uring probe_ring;
  ASSERT_EQ(io_uring_queue_init(4, &probe_ring, 0), 0);
  io_uring_probe* probe = io_uring_get_probe_ring(&probe_ring);
  const bool vectored = probe != nullptr && io_uring_opcode_supported(probe, kOpReadvFixed);
  if (probe != nullptr) io_uring_free_probe(probe);
  io_uring_queue_exit(&probe_ring);
  EXPECT_EQ(engine_->stats().fixed_requests, before_vectored + (vectored ? 2 : 0))
      << "two segments of one chunk: fixed where the kernel has READV/WRITEV_FIXED";

  // A segment outside the arena makes the request an ordinary one; the bytes still arrive.
  AlignedBuffer heap(65536);
  const auto before_mixed = engine_->stats().fixed_requests;
  ASSERT_EQ(run(MemberOp::read, back.data(), heap.data()), 131072);
  EXPECT_EQ(std::memcmp(heap.data(), pattern.data(), 65536), 0);
  EXPECT_EQ(engine_->stats().fixed_requests, before_mixed);
}

// Requests queued together (here by a continuation, on the engine's thread, as a Volume's
// follow-up I/O is) go to the ring in one submission, up to the queue depth (64). After
// that, each completion frees a slot that is refilled at once: the queue stays full.
TEST_F(FileMemberTest, RequestsQueuedTogetherShareSubmissions) {
  FileMember& m = make(8 << 20);
  AlignedBuffer data = test::random_buffer(8 << 20, 3);
  constexpr int kRequests = 512;
  std::atomic<int> left{kRequests};
  std::promise<void> all_done;
  IoEngineStats at_start;
  MemberRequest first;
  first.op = MemberOp::flush;
  first.done = [&](int64_t) {
    at_start = engine_->stats();
    for (int i = 0; i < kRequests; ++i) {
      MemberRequest r;
      r.op = MemberOp::write;
      r.offset = uint64_t(i) * 16384;
      r.iov.push_back({data.data() + r.offset, 16384});
      r.done = [&](int64_t res) {
        EXPECT_EQ(res, 16384);
        if (--left == 0) all_done.set_value();
      };
      m.submit(std::move(r));
    }
  };
  m.submit(std::move(first));
  all_done.get_future().wait();
  const auto stats = engine_->stats();
  EXPECT_GE(stats.requests - at_start.requests, uint64_t{kRequests});
  EXPECT_GE(stats.largest_batch, 63u) << "a burst must share one io_uring_enter call";
  EXPECT_LT(stats.submit_calls - at_start.submit_calls, uint64_t{kRequests});
}

TEST_F(FileMemberTest, VolumeOnFilesSurvivesAMemberFailingMidStream) {
  constexpr uint32_t kChunk = 65536;
  constexpr uint64_t kOffset = 1 << 20;
  const uint64_t member_size = kOffset + 32 * kChunk;
  std::vector<std::unique_ptr<FaultyMember>> wrapped;
  std::vector<Member*> members;
  for (int i = 0; i < 5; ++i) {
    wrapped.push_back(std::make_unique<FaultyMember>(make(member_size)));
    members.push_back(wrapped.back().get());
  }
  auto geometry = Geometry::create(RaidLevel::raid6, 5, kChunk, 32 * kChunk);
  auto volume = Volume::create(*geometry, members, kOffset);
  ASSERT_TRUE(volume);
  Volume& v = **volume;
  auto registration = engine_->register_buffer(v.parity_arena().data(), v.parity_arena().size());
  ASSERT_TRUE(registration);
  wrapped[3]->fail_after(20);
  AlignedBuffer data = test::random_buffer(v.size(), 4);
  const uint64_t piece = 5 * 4096;  // neither chunk- nor stripe-aligned: both paths
  for (uint64_t at = 0; at < v.size(); at += piece) {
    const uint64_t length = std::min(piece, v.size() - at);
    auto w = v.write(at, data.span().subspan(at, length));
    ASSERT_TRUE(w) << w.error().message;
  }
  EXPECT_FALSE(v.active(3));
  AlignedBuffer back(v.size());
  ASSERT_TRUE(v.read(0, back.span()));
  EXPECT_EQ(std::memcmp(back.data(), data.data(), data.size()), 0);
  // Isolated full stripes: each parity chunk is a request of its own, from the registered
  // arena, so it goes out as a fixed-buffer write. (In a stream, parity merges with the
  // neighbouring data chunks into one vectored write instead.)
  const auto fixed_before = engine_->stats().fixed_requests;
  uint64_t parity_requests = 0;
  const uint64_t stripe = v.geometry().stripe_data_size();
  for (uint64_t s : {0, 2, 4, 6}) {
    ASSERT_TRUE(v.write(s * stripe, data.span().subspan(s * stripe, stripe)));
    parity_requests += (v.geometry().p_member(s) != 3) + (v.geometry().q_member(s) != 3);
  }
  EXPECT_EQ(engine_->stats().fixed_requests - fixed_before, parity_requests);
  ASSERT_TRUE(v.flush());
}

// A loop device with 4 KiB sectors: limits come from sysfs, the size from BLKGETSIZE64.
TEST_F(FileMemberTest, BlockDeviceLimitsComeFromSysfs) {
  const std::string backing = dir_ + "/loop-backing";
  int fd = ::open(backing.c_str(), O_CREAT | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 16 << 20), 0);
  ::close(fd);
  const std::string setup = "losetup -f --show -b 4096 " + backing + " 2>/dev/null";
  FILE* out = popen(setup.c_str(), "r");
  ASSERT_NE(out, nullptr);
  char line[128] = {};
  const bool got = fgets(line, sizeof line, out) != nullptr;
  pclose(out);
  if (!got) GTEST_SKIP() << "no loop device (needs root and losetup)";
  std::string device(line);
  device.erase(device.find_last_not_of(" \n") + 1);
  {
    auto member = FileMember::open(device, *engine_);
    ASSERT_TRUE(member) << member.error().message;
    EXPECT_TRUE((*member)->is_block_device());
    EXPECT_EQ((*member)->size(), 16u << 20);
    EXPECT_EQ((*member)->limits().logical_block, 4096u);
    const std::string sysfs = "/sys/block/" + device.substr(device.rfind('/') + 1) + "/queue/";
    uint64_t max_kb = 0;
    FILE* f = fopen((sysfs + "max_sectors_kb").c_str(), "r");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(fscanf(f, "%lu", &max_kb), 1);
    fclose(f);
    EXPECT_EQ((*member)->limits().max_io, max_kb * 1024);
    AlignedBuffer data = test::random_buffer(65536, 9);
    EXPECT_TRUE(member_write(**member, 4096, data.span()));
    AlignedBuffer back(65536);
    EXPECT_TRUE(member_read(**member, 4096, back.span()));
    EXPECT_EQ(std::memcmp(back.data(), data.data(), data.size()), 0);
    // Opened exclusively, as md does: a second claim fails.
    auto again = FileMember::open(device, *engine_);
    EXPECT_FALSE(again);
  }
  EXPECT_EQ(std::system(("losetup -d " + device).c_str()), 0);
}

}  // namespace
}  // namespace stripefs
