// stripefsctl scrub on a mounted filesystem: a chunk of one member corrupted behind the
// array's back (unmounted, as a failing disk or a bad cable does) is found; RAID6 names the
// member and repairs it when asked, after which a second scrub is clean and every file reads
// right; RAID5 cannot name it, says so, and rewrites nothing. On an idle filesystem it runs
// at the idle limit, and an unmount cuts it short and the next mount resumes it.
#include <fcntl.h>
#include <unistd.h>

#include "mounted/operations_fixture.hpp"

namespace stripefs::test {
namespace {

class ScrubAtLevel : public Operations, public ::testing::WithParamInterface<Level> {
 protected:
  // Flips 4 KiB of member `member` two MiB into its data area, unmounted.
  void corrupt(unsigned member) {
    const Status unmounted = fs_.unmount();
    ASSERT_TRUE(unmounted) << unmounted.error();
    const std::filesystem::path path = fs_.members()[member];
    auto data_offset = member_data_offset(path);
    ASSERT_TRUE(data_offset) << data_offset.error();
    Fd fd = open_file(path.string(), O_RDWR);
    ASSERT_TRUE(fd.valid());
    const off_t at = static_cast<off_t>(*data_offset + 2 * kMiB);
    Bytes bytes(4096);
    ASSERT_EQ(pread(fd.get(), bytes.data(), bytes.size(), at), 4096);
    for (auto& b : bytes) b ^= 0x5a;
    ASSERT_EQ(pwrite(fd.get(), bytes.data(), bytes.size(), at), 4096);
    const Status mounted = fs_.mount();
    ASSERT_TRUE(mounted) << mounted.error();
  }
  nlohmann::json scrub(const std::string& flags) {
    const Ctl run = stripefsctl("scrub start " + mnt() + " --wait " + flags);
    EXPECT_EQ(run.status, 0) << run.out;
    return status()["scrub"];
  }
};

TEST_P(ScrubAtLevel, FindsACorruptedChunkAndRepairsItOnlyWhereItCanBeNamed) {
  const bool named = std::string(GetParam().level) == "6";
  start(GetParam());
  start_writer();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  stop_writer();
  ASSERT_NO_FATAL_FAILURE(corrupt(2));

  nlohmann::json check = scrub("");
  ASSERT_TRUE(check.is_object()) << status().dump(2);
  EXPECT_EQ(check["done"], check["total"]);
  EXPECT_EQ(check["mismatched"], 1);
  EXPECT_EQ(check["repaired"], 0);
  EXPECT_TRUE(check["error"].is_null());
  EXPECT_TRUE(check["ended"].is_string());
  if (named) {
    ASSERT_EQ(check["bad_chunks"].size(), 1u) << check.dump(2);
    EXPECT_EQ(check["bad_chunks"][0]["role"], 2);
    EXPECT_EQ(check["bad_chunks"][0]["count"], 1);
    nlohmann::json repair = scrub("--repair");
    EXPECT_EQ(repair["repaired"], 1);
    nlohmann::json again = scrub("");
    EXPECT_EQ(again["mismatched"], 0) << "not clean after the repair";
  } else {
    EXPECT_EQ(check["unrepairable"], 1);
    EXPECT_NE(status()["action"].get<std::string>().find("no chunk could be named"),
              std::string::npos);
    nlohmann::json repair = scrub("--repair");
    EXPECT_EQ(repair["repaired"], 0);
    EXPECT_EQ(repair["unrepairable"], 1) << "rewritten on a guess";
  }
  const Ctl human = stripefsctl("scrub status " + mnt());
  EXPECT_EQ(human.status, 0);
  EXPECT_NE(human.out.find("stripes checked"), std::string::npos) << human.out;
  ASSERT_NO_FATAL_FAILURE(expect_files());
}

TEST_P(ScrubAtLevel, BadRequestsAreRefusedWithOneLine) {
  start(GetParam());
  for (const std::string& args :
       {"scrub stop " + mnt(), "scrub begin " + mnt(), "scrub status " + mnt() + " --repair"}) {
    const Ctl refused = stripefsctl(args);
    EXPECT_NE(refused.status, 0) << args;
    EXPECT_EQ(std::count(refused.out.begin(), refused.out.end(), '\n'), 1) << refused.out;
  }
}

// md's limits: the minimum while the filesystem has other I/O, no limit (the default maximum)
// while it has none. On an idle filesystem the scrub's own reads (of the members, and of the
// checksums it checks against) are not other I/O: at the minimum given here (1 MiB a second
// of each member's 96 MiB) it would take over a minute and a half; unlimited, well under a
// second (and one round taken for busy, 16 MiB, would cost 16 s, not a failure).
TEST_P(ScrubAtLevel, OnAnIdleFilesystemItIsNotHeldToTheBusyLimit) {
  start(GetParam(), "speed_limit_min=1M");
  start_writer();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  stop_writer();
  {
    Fd root = open_file(fs_.root().string(), O_RDONLY | O_DIRECTORY);
    ASSERT_TRUE(root.valid());
    ASSERT_EQ(syncfs(root.get()), 0) << "nothing of the writer's left to write back meanwhile";
  }
  const Ctl started = ctl("scrub start");
  ASSERT_EQ(started.status, 0) << started.out;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  nlohmann::json now = status()["scrub"];
  while (now["running"].get<bool>() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    now = status()["scrub"];
  }
  EXPECT_FALSE(now["running"].get<bool>()) << "held to the busy limit: " << now.dump(2);
  EXPECT_EQ(now["done"], now["total"]) << now.dump(2);
  EXPECT_GT(now["verified_blocks"].get<uint64_t>(), 0u) << now.dump(2);
  if (now["running"].get<bool>()) (void)ctl("scrub stop");
}

// An unmount cuts a slow scrub short; the next mount resumes it from its checkpoint (status
// says where), and once it has finished, a later mount still shows when it ended.
TEST_P(ScrubAtLevel, AScrubCutShortByAnUnmountResumesAtTheNextMount) {
  start(GetParam(), "speed_limit_min=2M,speed_limit_max=2M");
  const Ctl started = ctl("scrub start");
  ASSERT_EQ(started.status, 0) << started.out;
  // Past the first checkpoint (every 5 s).
  std::this_thread::sleep_for(std::chrono::milliseconds(6500));
  const nlohmann::json before = status()["scrub"];
  ASSERT_TRUE(before["running"].get<bool>()) << before.dump(2);
  const Status unmounted = fs_.unmount();
  ASSERT_TRUE(unmounted) << unmounted.error();
  const Status mounted = fs_.mount();
  ASSERT_TRUE(mounted) << mounted.error();
  const nlohmann::json resumed = status()["scrub"];
  ASSERT_TRUE(resumed.is_object()) << status().dump(2);
  EXPECT_TRUE(resumed["running"].get<bool>()) << resumed.dump(2);
  EXPECT_GT(resumed["resumed_from"].get<uint64_t>(), 0u) << resumed.dump(2);
  // The unmount records how far the scrub got (it went on after `before` was read), so the
  // resume point may lie past `before`, but never at the end.
  EXPECT_LT(resumed["resumed_from"].get<uint64_t>(), before["total"].get<uint64_t>());
  const Ctl human = ctl("scrub status");
  EXPECT_NE(human.out.find("resumed at stripe"), std::string::npos) << human.out;
  ASSERT_EQ(ctl("speed", "--min 1G --max 0").status, 0);
  const Ctl waited = ctl("scrub status --wait");
  EXPECT_EQ(waited.status, 0) << waited.out;
  const Status again_down = fs_.unmount();
  ASSERT_TRUE(again_down) << again_down.error();
  const Status again_up = fs_.mount();
  ASSERT_TRUE(again_up) << again_up.error();
  const nlohmann::json last = status()["scrub"];
  EXPECT_TRUE(last["before_mount"].get<bool>()) << last.dump(2);
  EXPECT_FALSE(last["running"].get<bool>()) << "a finished scrub was resumed";
  const Ctl shown = ctl("status");
  EXPECT_NE(shown.out.find("(before this mount)"), std::string::npos) << shown.out;
}

INSTANTIATE_TEST_SUITE_P(, ScrubAtLevel, testing::Values(Level{"5", 4}, Level{"6", 5}),
                         [](const testing::TestParamInfo<Level>& info) {
                           return std::string("raid") + info.param.level;
                         });

}  // namespace
}  // namespace stripefs::test
