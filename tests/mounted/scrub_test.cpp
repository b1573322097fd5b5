// stripefsctl scrub on a mounted filesystem: a chunk of one member corrupted behind the
// array's back (unmounted, as a failing disk or a bad cable does) is found; RAID6 names the
// member and repairs it when asked, after which a second scrub is clean and every file reads
// right; RAID5 cannot name it, says so, and rewrites nothing.
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

INSTANTIATE_TEST_SUITE_P(, ScrubAtLevel, testing::Values(Level{"5", 4}, Level{"6", 5}),
                         [](const testing::TestParamInfo<Level>& info) {
                           return std::string("raid") + info.param.level;
                         });

}  // namespace
}  // namespace stripefs::test
