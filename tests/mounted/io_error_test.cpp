// A member that really fails, on a mounted filesystem: the members are loop devices (the
// block-device path, O_DIRECT through io_uring), and one of them shrinks under the running
// filesystem, so the kernel fails every request beyond its new end, as a dying disk does —
// no test hook in the daemon. The writer goes on, the daemon takes the member out and records
// it faulty, and every file reads back; a new device is then added and rebuilt onto.
#include "mounted/operations_fixture.hpp"

namespace stripefs::test {
namespace {

class IoErrorAtLevel : public Operations, public testing::WithParamInterface<Level> {
 protected:
  void start_on_loops(Level level) {
    if (!std::filesystem::exists("/dev/loop-control")) {
      GTEST_SKIP() << "no loop devices here (/dev/loop-control)";
    }
    fs_.use_loop_devices();
    ASSERT_NO_FATAL_FAILURE(start(level, "speed_limit_min=64M"));
  }
};

TEST_P(IoErrorAtLevel, AMemberFailingForRealLosesNothing) {
  ASSERT_NO_FATAL_FAILURE(start_on_loops(GetParam()));
  if (IsSkipped()) return;
  ASSERT_NO_FATAL_FAILURE(start_writer());
  // Past its superblock and metadata areas: the data beyond 8 MiB is gone.
  const Status shrunk = fs_.shrink_member(1, 8 * kMiB);
  ASSERT_TRUE(shrunk) << shrunk.error();
  nlohmann::json s;
  for (int i = 0; i < 1000; ++i) {
    s = status();
    if (s["members"][1]["state"] == "faulty") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(s["members"][1]["state"], "faulty") << s.dump(2);
  EXPECT_EQ(s["state"], "degraded");
  EXPECT_GT(s["members"][1]["errors"].get<uint64_t>(), 0u);
  const size_t before = files();
  while (files() < before + 8 && !HasFailure()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stop_writer();
  ASSERT_NO_FATAL_FAILURE(expect_files());
  // A new device takes the role, and the array is whole again.
  const auto fresh = device("new1.img");
  const Ctl added = ctl("add", "'" + fresh.string() + "'");
  ASSERT_EQ(added.status, 0) << added.out;
  ASSERT_NO_FATAL_FAILURE(wait_task());
  s = status();
  EXPECT_EQ(s["state"], "clean") << s.dump(2);
  EXPECT_EQ(s["members"][1]["path"], fresh.string());
  ASSERT_NO_FATAL_FAILURE(expect_files());
}

INSTANTIATE_TEST_SUITE_P(, IoErrorAtLevel,
                         testing::Values(Level{"1", 2}, Level{"10", 4}, Level{"5", 4},
                                         Level{"6", 5}),
                         [](const testing::TestParamInfo<Level>& info) {
                           return std::string("raid") + info.param.level;
                         });

}  // namespace
}  // namespace stripefs::test
