// open_member and open_devices: which backend drives a device, and the refusals that name
// what is wrong.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "raid/aligned_buffer.hpp"
#include "raid/member_devices.hpp"
#include "raid/pmem_member.hpp"
#include "unit/raid/test_util.hpp"

namespace stripefs::test {
namespace {

constexpr uint64_t kSize = 4 << 20;

class MemberBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/var/tmp/stripefs-backend-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    for (int i = 0; i < 2; ++i) {
      paths_.push_back(dir_ + "/member-" + std::to_string(i));
      std::ofstream(paths_.back()).close();
      std::filesystem::resize_file(paths_.back(), kSize);
    }
    auto engine = IoEngine::create(16);
    ASSERT_TRUE(engine) << engine.error().message;
    engine_ = std::move(*engine);
  }
  void TearDown() override {
    engine_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::string dir_;
  std::vector<std::string> paths_;
  std::unique_ptr<IoEngine> engine_;
};

TEST_F(MemberBackendTest, ParsesTheThreeNamesAndNamesAnythingElse) {
  EXPECT_EQ(*parse_member_backend("auto"), MemberBackend::automatic);
  EXPECT_EQ(*parse_member_backend("block"), MemberBackend::block);
  EXPECT_EQ(*parse_member_backend("pmem"), MemberBackend::pmem);
  for (auto backend : {MemberBackend::automatic, MemberBackend::block, MemberBackend::pmem}) {
    EXPECT_EQ(*parse_member_backend(to_string(backend)), backend);
  }
  auto bad = parse_member_backend("dax");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("'dax'"), std::string::npos) << bad.error().message;
}

TEST_F(MemberBackendTest, AnOrdinaryFileIsAFileMemberUnlessPmemIsAskedFor) {
  // /var/tmp is not DAX: automatic takes the block path.
  auto automatic = open_member(paths_[0], *engine_, MemberBackend::automatic);
  ASSERT_TRUE(automatic) << automatic.error().message;
  EXPECT_NE(dynamic_cast<FileMember*>(automatic->get()), nullptr);
  EXPECT_EQ(member_backend_name(**automatic), "file");
  automatic->reset();

  auto pmem = open_member(paths_[0], *engine_, MemberBackend::pmem);
  ASSERT_TRUE(pmem) << pmem.error().message;
  EXPECT_NE(dynamic_cast<PmemMember*>(pmem->get()), nullptr);
  EXPECT_EQ(member_backend_name(**pmem), "pmem");
  EXPECT_EQ((*pmem)->size(), kSize);
}

TEST_F(MemberBackendTest, BothBackendsSeeTheSameBytes) {
  AlignedBuffer data = random_buffer(64 * 1024, 7);
  {
    auto pmem = open_member(paths_[0], *engine_, MemberBackend::pmem);
    ASSERT_TRUE(pmem) << pmem.error().message;
    ASSERT_TRUE(member_write(**pmem, 1 << 20, data.span()));
    ASSERT_TRUE(member_flush(**pmem));
  }
  auto block = open_member(paths_[0], *engine_, MemberBackend::block);
  ASSERT_TRUE(block) << block.error().message;
  AlignedBuffer back(data.size());
  ASSERT_TRUE(member_read(**block, 1 << 20, back.span()));
  EXPECT_EQ(std::memcmp(back.data(), data.data(), data.size()), 0);
}

TEST_F(MemberBackendTest, OpenDevicesUsesTheBackendForEveryDeviceAndTheJournal) {
  auto devices = open_devices({paths_[0]}, paths_[1], MemberBackend::pmem);
  ASSERT_TRUE(devices) << devices.error().message;
  EXPECT_EQ((*devices)->backend, MemberBackend::pmem);
  ASSERT_EQ((*devices)->members.size(), 1u);
  EXPECT_EQ(member_backend_name(*(*devices)->members[0]), "pmem");
  ASSERT_NE((*devices)->journal, nullptr);
  EXPECT_EQ(member_backend_name(*(*devices)->journal), "pmem");
}

TEST_F(MemberBackendTest, PmemRefusesABlockDeviceByName) {
  // Any block device will do: the refusal comes before anything is opened for writing.
  std::string block;
  for (const char* candidate :
       {"/dev/loop0", "/dev/ram0", "/dev/vda", "/dev/sda", "/dev/nvme0n1"}) {
    struct stat st {};
    if (::stat(candidate, &st) == 0 && S_ISBLK(st.st_mode)) {
      block = candidate;
      break;
    }
  }
  if (block.empty()) GTEST_SKIP() << "no block device node to try";
  auto member = open_member(block, *engine_, MemberBackend::pmem);
  ASSERT_FALSE(member);
  EXPECT_EQ(member.error().code, EINVAL);
  EXPECT_NE(member.error().message.find(block), std::string::npos) << member.error().message;
  EXPECT_NE(member.error().message.find("block device"), std::string::npos)
      << member.error().message;
}

TEST_F(MemberBackendTest, APmemFailureNamesTheDevice) {
  auto member = open_member(dir_ + "/missing", *engine_, MemberBackend::pmem);
  ASSERT_FALSE(member);
  EXPECT_NE(member.error().message.find(dir_ + "/missing"), std::string::npos)
      << member.error().message;
}

}  // namespace
}  // namespace stripefs::test
