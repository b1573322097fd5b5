// open_array: the one way to open an array with its bitmap, its stripe journal and its
// parity buffers registered with io_uring.
#include "journal/open_array.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "journal/array_bitmap.hpp"
#include "journal/array_journal.hpp"
#include "raid/file_member.hpp"
#include "unit/raid/test_util.hpp"

namespace stripefs {
namespace {

using std::chrono::milliseconds;

constexpr uint32_t kChunk = 65536;
constexpr uint64_t kMemberSize = 48 << 20;

// RAID5 of four members with a bitmap and a journal mirrored on the members, as mkfs makes.
Superblock make_array(std::span<Member* const> members) {
  ArrayOptions create;
  create.level = RaidLevel::raid5;
  create.chunk_size = kChunk;
  add_bitmap(create, 0, milliseconds(0));
  add_member_journal(create, 4096);
  auto made = create_array(members, create);
  EXPECT_TRUE(made) << made.error().message;
  return made ? *made : Superblock{};
}

TEST(OpenArray, PlugsInTheBitmapAndTheJournal) {
  test::MemoryArray media(4, kMemberSize);
  make_array(media.members());
  auto refused = Array::open(media.members(), OpenOptions{});
  ASSERT_FALSE(refused) << "an array with a journal is refused without it";
  auto opened = open_array(media.members(), ArraySetup{.bitmap_clear_delay = milliseconds(0)});
  ASSERT_TRUE(opened) << opened.error().message;
  EXPECT_NE((*opened)->write_intent(), nullptr);
  EXPECT_NE((*opened)->stripe_log(), nullptr);
  EXPECT_TRUE((*opened)->logs_partial_stripes());
  ASSERT_TRUE(opened->close());
  auto unlogged = open_array(media.members(), ArraySetup{.log_partial_stripes = false});
  ASSERT_TRUE(unlogged) << unlogged.error().message;
  EXPECT_FALSE((*unlogged)->logs_partial_stripes());
  EXPECT_TRUE(unlogged->close());
}

// Members on files driven through io_uring (not tmpfs, which is driven inline): the parity of
// isolated full stripes goes out from the registered arena as fixed-buffer writes.
TEST(OpenArray, RegistersTheParityBuffersWithTheEngine) {
  char pattern[] = "/var/tmp/stripefs-test-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const std::string dir = pattern;
  auto engine = IoEngine::create(64);
  ASSERT_TRUE(engine) << engine.error().message;
  std::vector<std::unique_ptr<FileMember>> files;
  std::vector<Member*> members;
  for (int i = 0; i < 4; ++i) {
    const std::string path = dir + "/m" + std::to_string(i);
    const int fd = ::open(path.c_str(), O_CREAT | O_RDWR, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, static_cast<off_t>(kMemberSize)), 0);
    ::close(fd);
    auto member = FileMember::open(path, **engine);
    ASSERT_TRUE(member) << member.error().message;
    members.push_back(member->get());
    files.push_back(std::move(*member));
  }
  make_array(members);
  for (IoEngine* with : {static_cast<IoEngine*>(nullptr), engine->get()}) {
    SCOPED_TRACE(with ? "with the engine" : "without");
    auto opened = open_array(members, ArraySetup{.engine = with});
    ASSERT_TRUE(opened) << opened.error().message;
    Volume& volume = (*opened)->volume();
    const uint64_t stripe = volume.geometry().stripe_data_size();
    AlignedBuffer data = test::random_buffer(stripe, 5);
    const uint64_t fixed_before = (*engine)->stats().fixed_requests;
    for (uint64_t s : {0, 2, 4, 6}) ASSERT_TRUE(volume.write(s * stripe, data.span()));
    const uint64_t fixed = (*engine)->stats().fixed_requests - fixed_before;
    if (with != nullptr) {
      EXPECT_GE(fixed, 4u) << "each isolated stripe's parity from the registered arena";
    } else {
      EXPECT_EQ(fixed, 0u);
    }
    ASSERT_TRUE(opened->close());
  }
  files.clear();
  engine->reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace stripefs
