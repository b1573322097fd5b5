// Hot replace on a mounted filesystem (stripefsctl replace, md's --replace): the old member
// serves while it is copied onto the new device under a writer; afterwards every file reads
// back, parity checks clean on the new set of members, and the new device carries the role
// when another member is lost. Also: a member failing in the middle of a replace loses
// nothing, failing the new device stops the replace with the old one serving on, and a
// replace cut short by kill -9 resumes at the next mount.
#include "mounted/operations_fixture.hpp"
#include "raid/superblock.hpp"

namespace stripefs::test {
namespace {

// How far the copy onto `device` is recorded, from its replacement superblock; 0 without one.
uint64_t replace_checkpoint(const std::filesystem::path& device) {
  std::array<std::byte, kSuperblockSize> block{};
  const int fd = ::open(device.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  const ssize_t got = pread(fd, block.data(), block.size(), kSuperblockOffset);
  ::close(fd);
  if (got != static_cast<ssize_t>(block.size())) return 0;
  auto sb = decode_superblock(block, device.string());
  return sb && sb->replacement() ? sb->rebuild_checkpoint : 0;
}

class ReplaceAtLevel : public Operations, public testing::WithParamInterface<Level> {};

TEST_P(ReplaceAtLevel, AMemberIsReplacedWhileWritesGoOn) {
  ASSERT_NO_FATAL_FAILURE(start(GetParam(), "speed_limit_min=24M,speed_limit_max=24M"));
  ASSERT_NO_FATAL_FAILURE(start_writer());
  const std::string old = fs_.members()[0].string();
  const auto fresh = device("new0.img");
  const Ctl replaced = ctl("replace", "0 '" + fresh.string() + "'");
  ASSERT_EQ(replaced.status, 0) << replaced.out;
  EXPECT_NE(replaced.out.find("replacing role 0"), std::string::npos) << replaced.out;
  nlohmann::json s = status();
  EXPECT_EQ(s["state"], "replacing") << s.dump(2);
  EXPECT_EQ(s["task"]["kind"], "replace") << s.dump(2);
  EXPECT_EQ(s["members"][0]["state"], "active") << "the old device serves on";
  EXPECT_EQ(s["members"][1]["path"], fresh.string()) << s.dump(2);
  EXPECT_EQ(s["members"][1]["state"], "replacement") << s.dump(2);
  const size_t before = files();
  ASSERT_NO_FATAL_FAILURE(wait_task());
  stop_writer();
  EXPECT_GT(files(), before) << "the writer went on during the replace";
  s = status();
  EXPECT_EQ(s["state"], "clean") << s.dump(2);
  EXPECT_EQ(s["members"][0]["path"], fresh.string());
  EXPECT_EQ(s["members"][0]["state"], "active");
  const auto gone = std::find_if(s["members"].begin(), s["members"].end(),
                                 [&](const nlohmann::json& m) { return m["path"] == old; });
  ASSERT_NE(gone, s["members"].end()) << s.dump(2);
  EXPECT_EQ((*gone)["state"], "replaced");
  ASSERT_NO_FATAL_FAILURE(expect_files());

  ASSERT_NO_FATAL_FAILURE(expect_new_set_holds(fresh));
}

INSTANTIATE_TEST_SUITE_P(, ReplaceAtLevel,
                         testing::Values(Level{"1", 2}, Level{"10", 4}, Level{"5", 4},
                                         Level{"6", 5}),
                         [](const testing::TestParamInfo<Level>& info) {
                           return std::string("raid") + info.param.level;
                         });

// RAID1 of two: the other member fails halfway through the replace of the first. Nothing
// is lost (the old device still serves its role), and the replace completes.
TEST_F(Operations, AMemberFailingDuringAReplaceLosesNothing) {
  ASSERT_NO_FATAL_FAILURE(start(Level{"1", 2}, "speed_limit_min=16M,speed_limit_max=16M"));
  ASSERT_NO_FATAL_FAILURE(start_writer());
  const auto fresh = device("new0.img");
  const Ctl replaced = ctl("replace", "0 '" + fresh.string() + "'");
  ASSERT_EQ(replaced.status, 0) << replaced.out;
  for (int i = 0; i < 500; ++i) {
    const nlohmann::json task = status()["task"];
    if (task.is_object() && task["done"].get<uint64_t>() * 3 > task["total"].get<uint64_t>()) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const Ctl failed = ctl("fail", "1");
  ASSERT_EQ(failed.status, 0) << failed.out;
  stop_writer();  // its files are checked while the copy goes on
  ASSERT_NO_FATAL_FAILURE(expect_files());
  ASSERT_NO_FATAL_FAILURE(start_writer());
  ASSERT_NO_FATAL_FAILURE(wait_task());
  stop_writer();
  const nlohmann::json s = status();
  EXPECT_EQ(s["members"][0]["path"], fresh.string()) << s.dump(2);
  EXPECT_EQ(s["members"][0]["state"], "active");
  EXPECT_EQ(s["state"], "degraded");
  ASSERT_NO_FATAL_FAILURE(expect_files());
}

// Failing the new device stops the replace: the old device keeps its role, the writer's
// files are all there, `status --wait` says the task stopped, and a second replace works.
TEST_F(Operations, FailingTheNewDeviceStopsTheReplace) {
  ASSERT_NO_FATAL_FAILURE(start(Level{"5", 4}, "speed_limit_min=4M,speed_limit_max=4M"));
  ASSERT_NO_FATAL_FAILURE(start_writer());
  const std::string old = fs_.members()[2].string();
  const auto fresh = device("new2.img");
  ASSERT_EQ(ctl("replace", "2 '" + fresh.string() + "'").status, 0);
  const Ctl stopped = ctl("fail", "'" + fresh.string() + "'");
  ASSERT_EQ(stopped.status, 0) << stopped.out;
  EXPECT_NE(stopped.out.find("replace of role 2 stopped"), std::string::npos) << stopped.out;
  const Ctl waited = ctl("status --wait");
  EXPECT_EQ(waited.status, 1) << waited.out;
  EXPECT_NE(waited.out.find("stopped on request"), std::string::npos) << waited.out;
  nlohmann::json s = status();
  EXPECT_EQ(s["state"], "clean") << s.dump(2);
  EXPECT_EQ(s["members"][2]["path"], old);
  EXPECT_EQ(s["members"][2]["state"], "active");
  stop_writer();
  ASSERT_NO_FATAL_FAILURE(expect_files());
  ASSERT_NO_FATAL_FAILURE(start_writer());
  ASSERT_EQ(ctl("speed", "--min 64M --max 0").status, 0);
  const Ctl again = ctl("replace", "2 '" + fresh.string() + "'");
  ASSERT_EQ(again.status, 0) << again.out;
  ASSERT_NO_FATAL_FAILURE(wait_task());
  stop_writer();
  s = status();
  EXPECT_EQ(s["members"][2]["path"], fresh.string()) << s.dump(2);
  ASSERT_NO_FATAL_FAILURE(expect_files());
}

// kill -9 in the middle of a hot replace: the next mount, given the new device beside the
// members, resumes the copy from the checkpoint in its superblock (md resumes a replacement
// from its recovery offset), and the new device then holds the role.
TEST_F(Operations, AReplaceInterruptedByKill9ResumesAtTheNextMount) {
  ASSERT_NO_FATAL_FAILURE(start(Level{"5", 4}, "speed_limit_min=4M,speed_limit_max=4M"));
  ASSERT_NO_FATAL_FAILURE(start_writer());
  const std::string old = fs_.members()[1].string();
  const auto fresh = device("new1.img");
  const Ctl replaced = ctl("replace", "1 '" + fresh.string() + "'");
  ASSERT_EQ(replaced.status, 0) << replaced.out;
  // A checkpoint every 5 seconds: one past the metadata areas.
  for (int i = 0; i < 300 && replace_checkpoint(fresh) <= (1u << 20); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  stop_writer();
  ASSERT_GT(replace_checkpoint(fresh), 1u << 20) << "no checkpoint recorded";
  const Status killed = fs_.kill9();
  ASSERT_TRUE(killed) << killed.error();
  std::vector<std::filesystem::path> given = fs_.members();
  given.push_back(fresh);
  fs_.set_members(given);
  const Status mounted = fs_.mount();
  ASSERT_TRUE(mounted) << mounted.error();
  nlohmann::json s = status();
  EXPECT_EQ(s["state"], "replacing") << s.dump(2);
  ASSERT_EQ(s["task"]["kind"], "replace") << s.dump(2);
  uint64_t resumed_at = 0;
  for (const auto& note : s["notes"]) {
    const std::string text = note.get<std::string>();
    const size_t at = text.find("resuming the copy at byte ");
    if (at != std::string::npos) resumed_at = std::stoull(text.substr(at + 26));
  }
  EXPECT_GT(resumed_at, 1u << 20) << "resumed from the checkpoint: " << s["notes"];
  ASSERT_EQ(ctl("speed", "--min 1G --max 0").status, 0);
  ASSERT_NO_FATAL_FAILURE(wait_task());
  s = status();
  EXPECT_EQ(s["state"], "clean") << s.dump(2);
  EXPECT_EQ(s["members"][1]["path"], fresh.string()) << s.dump(2);
  const auto gone = std::find_if(s["members"].begin(), s["members"].end(),
                                 [&](const nlohmann::json& m) { return m["path"] == old; });
  ASSERT_NE(gone, s["members"].end()) << s.dump(2);
  EXPECT_EQ((*gone)["state"], "replaced");
  ASSERT_NO_FATAL_FAILURE(expect_files());
  std::vector<std::filesystem::path> members = fs_.members();
  members.pop_back();
  members[1] = fresh;
  fs_.set_members(members);
  const Status unmounted = fs_.unmount();
  ASSERT_TRUE(unmounted) << unmounted.error();
  ASSERT_NO_FATAL_FAILURE(expect_consistent(members));
}

}  // namespace
}  // namespace stripefs::test
