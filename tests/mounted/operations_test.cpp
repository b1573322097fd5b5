// The day a disk dies, on a mounted filesystem: a member fails (stripefsctl fail) while a
// writer runs, a new device is added and rebuilt onto, and afterwards every file reads back
// right, parity checks clean, and the array survives losing another member. Also: a spare
// taking over by itself (and the event program hearing of it), a rebuild resumed after a
// kill -9 of the daemon, RAID6 rebuilding two members, and requests that are refused.
#include "mounted/operations_fixture.hpp"

namespace stripefs::test {
namespace {

class RebuildAtLevel : public Operations, public testing::WithParamInterface<Level> {};

// Member 0 fails mid-write, a new device is added and rebuilt onto while the writer goes on;
// then the array is clean, parity matches, and it can lose member 1 without losing a file.
TEST_P(RebuildAtLevel, AFailedMemberIsRebuiltOntoANewDeviceWhileWritesGoOn) {
  ASSERT_NO_FATAL_FAILURE(start(GetParam(), "speed_limit_min=32M"));
  ASSERT_NO_FATAL_FAILURE(start_writer());
  const Ctl failed = ctl("fail", "0");
  ASSERT_EQ(failed.status, 0) << failed.out;
  nlohmann::json s = status();
  EXPECT_EQ(s["state"], "degraded");
  EXPECT_EQ(s["members"][0]["state"], "faulty");
  EXPECT_NE(s["action"].get<std::string>().find("stripefsctl add"), std::string::npos);
  const size_t before = files();
  const auto spare = device("new0.img");
  const Ctl added = ctl("add", "'" + spare.string() + "'");
  ASSERT_EQ(added.status, 0) << added.out;
  EXPECT_NE(added.out.find("rebuilding role 0"), std::string::npos) << added.out;
  ASSERT_NO_FATAL_FAILURE(wait_task());
  stop_writer();
  EXPECT_GT(files(), before) << "the writer went on during the rebuild";
  s = status();
  EXPECT_EQ(s["state"], "clean");
  EXPECT_EQ(s["members"][0]["path"], spare.string());
  EXPECT_EQ(s["members"][0]["state"], "active");
  EXPECT_TRUE(s["task"].is_null());
  ASSERT_NO_FATAL_FAILURE(expect_files());

  ASSERT_NO_FATAL_FAILURE(expect_new_set_holds(spare));
}

INSTANTIATE_TEST_SUITE_P(, RebuildAtLevel,
                         testing::Values(Level{"1", 2}, Level{"10", 4}, Level{"5", 4},
                                         Level{"6", 5}),
                         [](const testing::TestParamInfo<Level>& info) {
                           return std::string("raid") + info.param.level;
                         });

// A spare waits (kept across a remount: its superblock says it is one); when a member
// fails, the rebuild onto it starts by itself, and the event program hears every step.
TEST_F(Operations, ASpareTakesOverAndTheEventProgramHearsOfIt) {
  const std::string script = "/var/tmp/stripefs-events-" + std::to_string(getpid());
  const std::string log = script + ".log";
  {
    std::ofstream out(script);
    out << "#!/bin/sh\necho \"$1 $3 $4\" >> " << log << "\n";
  }
  ASSERT_EQ(chmod(script.c_str(), 0755), 0);
  std::filesystem::remove(log);
  ASSERT_NO_FATAL_FAILURE(start({"5", 4}, "event_program=" + script));
  const auto spare = device("spare.img");
  const Ctl added = ctl("add", "'" + spare.string() + "'");
  ASSERT_EQ(added.status, 0) << added.out;
  EXPECT_NE(added.out.find("as a spare"), std::string::npos) << added.out;
  nlohmann::json s = status();
  EXPECT_EQ(s["state"], "clean");
  EXPECT_EQ(s["members"].back()["state"], "spare");
  // Recorded on the device: a mount given it keeps it as a spare.
  std::vector<std::filesystem::path> members = fs_.members();
  members.push_back(spare);
  fs_.set_members(members);
  const Status unmounted = fs_.unmount();
  ASSERT_TRUE(unmounted) << unmounted.error();
  const Status mounted = fs_.mount();
  ASSERT_TRUE(mounted) << mounted.error();
  s = status();
  EXPECT_EQ(s["state"], "clean") << s.dump(2);
  EXPECT_EQ(s["members"].back()["path"], spare.string()) << s.dump(2);
  EXPECT_EQ(s["members"].back()["state"], "spare") << s.dump(2);
  ASSERT_NO_FATAL_FAILURE(start_writer());
  ASSERT_EQ(ctl("fail", "'" + fs_.members()[2].string() + "'").status, 0);
  // The rebuild starts from the event thread: wait until it has.
  for (int i = 0; i < 500 && status()["members"][2]["path"] != spare.string(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_NO_FATAL_FAILURE(wait_task());
  stop_writer();
  s = status();
  EXPECT_EQ(s["state"], "clean");
  EXPECT_EQ(s["members"][2]["path"], spare.string());
  ASSERT_NO_FATAL_FAILURE(expect_files());
  // The events are handled in order, one at a time: the last may still be on its way.
  std::string events;
  for (int i = 0; i < 500 && events.find("rebuild-finished") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::ifstream in(log);
    events.assign(std::istreambuf_iterator<char>(in), {});
  }
  for (const char* event :
       {"member-failed", "array-degraded", "spare-used", "rebuild-started", "rebuild-finished"}) {
    EXPECT_NE(events.find(event), std::string::npos) << event << " not in:\n" << events;
  }
  EXPECT_NE(events.find("member-failed " + fs_.members()[2].string() + " 2"), std::string::npos)
      << events;
  std::filesystem::remove(script);
  std::filesystem::remove(log);
}

// kill -9 in the middle of a rebuild: the next mount resumes it from its checkpoint.
TEST_F(Operations, ARebuildInterruptedByKill9ResumesFromItsCheckpoint) {
  // Slow: a few MiB a second, so the rebuild is in its middle when the daemon dies.
  ASSERT_NO_FATAL_FAILURE(start({"5", 4}, "speed_limit_min=4M,speed_limit_max=4M"));
  ASSERT_NO_FATAL_FAILURE(start_writer());
  stop_writer();
  ASSERT_EQ(ctl("fail", "0").status, 0);
  const auto spare = device("new0.img");
  ASSERT_EQ(ctl("add", "'" + spare.string() + "'").status, 0);
  // A checkpoint is recorded every 5 seconds.
  std::this_thread::sleep_for(std::chrono::seconds(7));
  const uint64_t reached = status()["task"]["done"].get<uint64_t>();
  ASSERT_GT(reached, 0u);
  const Status killed = fs_.kill9();
  ASSERT_TRUE(killed) << killed.error();
  std::vector<std::filesystem::path> members = fs_.members();
  members[0] = spare;
  fs_.set_members(members);
  const Status mounted = fs_.mount();
  ASSERT_TRUE(mounted) << mounted.error();
  nlohmann::json s = status();
  EXPECT_EQ(s["state"], "rebuilding");
  ASSERT_EQ(s["task"]["kind"], "rebuild");
  // The mount says where it resumed: past the start, and not past where the task is now.
  uint64_t resumed_at = 0;
  for (const auto& note : s["notes"]) {
    const std::string text = note.get<std::string>();
    const size_t at = text.find("resuming at member byte ");
    if (at != std::string::npos) resumed_at = std::stoull(text.substr(at + 24));
  }
  EXPECT_GT(resumed_at, 0u) << "resumed from the checkpoint: " << s["notes"];
  EXPECT_LE(resumed_at, s["task"]["done"].get<uint64_t>());
  EXPECT_LT(s["task"]["done"].get<uint64_t>(), s["task"]["total"].get<uint64_t>());
  ASSERT_EQ(ctl("speed", "--min 1G --max 0").status, 0);
  ASSERT_NO_FATAL_FAILURE(wait_task());
  EXPECT_EQ(status()["state"], "clean");
  ASSERT_NO_FATAL_FAILURE(expect_files());
  const Status unmounted = fs_.unmount();
  ASSERT_TRUE(unmounted) << unmounted.error();
  ASSERT_NO_FATAL_FAILURE(expect_consistent(members));
}

// md's --re-add while mounted: a member that failed comes back, and only what the bitmap
// recorded since is rebuilt on it, while the writer goes on.
TEST_F(Operations, AFailedMemberIsReAddedWhileMounted) {
  ASSERT_NO_FATAL_FAILURE(start({"5", 4}, "speed_limit_min=64M"));
  ASSERT_NO_FATAL_FAILURE(start_writer());
  const auto member = fs_.members()[1];
  ASSERT_EQ(ctl("fail", "1").status, 0);
  const size_t before = files();
  while (files() < before + 16 && !HasFailure()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const Ctl back = ctl("re-add", "'" + member.string() + "'");
  ASSERT_EQ(back.status, 0) << back.out;
  EXPECT_NE(back.out.find("re-added as role 1"), std::string::npos) << back.out;
  ASSERT_NO_FATAL_FAILURE(wait_task());
  stop_writer();
  nlohmann::json s = status();
  EXPECT_EQ(s["state"], "clean");
  EXPECT_EQ(s["members"][1]["path"], member.string());
  ASSERT_NO_FATAL_FAILURE(expect_files());
  const Ctl again = ctl("re-add", "'" + member.string() + "'");
  EXPECT_EQ(again.status, 1) << "in service again: " << again.out;
  const Status unmounted = fs_.unmount();
  ASSERT_TRUE(unmounted) << unmounted.error();
  ASSERT_NO_FATAL_FAILURE(expect_consistent(fs_.members()));
}

// RAID6 with two members failed rebuilds both, onto two new devices.
TEST_F(Operations, Raid6RebuildsTwoFailedMembers) {
  ASSERT_NO_FATAL_FAILURE(start({"6", 5}, "speed_limit_min=64M"));
  ASSERT_NO_FATAL_FAILURE(start_writer());
  ASSERT_EQ(ctl("fail", "1").status, 0);
  ASSERT_EQ(ctl("fail", "3").status, 0);
  EXPECT_NE(ctl("fail", "4").status, 0) << "a third would stop the array";
  const auto a = device("new1.img"), b = device("new3.img");
  ASSERT_EQ(ctl("add", "'" + a.string() + "'").status, 0);
  ASSERT_EQ(ctl("add", "'" + b.string() + "'").status, 0);
  ASSERT_NO_FATAL_FAILURE(wait_task());
  stop_writer();
  nlohmann::json s = status();
  EXPECT_EQ(s["state"], "clean");
  EXPECT_EQ(s["members"][1]["path"], a.string());
  EXPECT_EQ(s["members"][3]["path"], b.string());
  ASSERT_NO_FATAL_FAILURE(expect_files());
  std::vector<std::filesystem::path> members = fs_.members();
  members[1] = a;
  members[3] = b;
  fs_.set_members(members);
  const Status unmounted = fs_.unmount();
  ASSERT_TRUE(unmounted) << unmounted.error();
  ASSERT_NO_FATAL_FAILURE(expect_consistent(members));
}

// Overwrites `length` bytes of a member's superblock (at byte 4096) with `byte`.
void damage_superblock(const std::filesystem::path& member, size_t at, size_t length,
                       uint8_t byte) {
  Fd fd = open_file(member.string(), O_WRONLY);
  ASSERT_TRUE(fd.valid());
  ASSERT_TRUE(write_at(fd.get(), Bytes(length, byte), static_cast<off_t>(4096 + at)));
}

// A member whose superblock is damaged is left out at mount, named in status, and the array
// starts degraded; added back, it is rebuilt. One whose superblock was wiped is refused (it
// may be a device named by mistake) unless forced.
TEST_F(Operations, ADamagedSuperblockStartsTheArrayDegraded) {
  ASSERT_NO_FATAL_FAILURE(start({"5", 4}));
  ASSERT_NO_FATAL_FAILURE(start_writer());
  stop_writer();
  Status done = fs_.unmount();
  ASSERT_TRUE(done) << done.error();
  const auto damaged = fs_.members()[3];
  ASSERT_NO_FATAL_FAILURE(damage_superblock(damaged, 100, 1, 0x55));
  done = fs_.mount();
  ASSERT_TRUE(done) << done.error();
  nlohmann::json s = status();
  EXPECT_EQ(s["state"], "degraded");
  EXPECT_EQ(s["members"][3]["state"], "missing");
  EXPECT_EQ(s["members"].back()["path"], damaged.string());
  EXPECT_TRUE(s["members"].back()["role"].is_null());
  ASSERT_FALSE(s["notes"].empty());
  EXPECT_NE(s["notes"][0].get<std::string>().find("kept out"), std::string::npos) << s["notes"];
  ASSERT_NO_FATAL_FAILURE(expect_files());
  const Ctl added = ctl("add", "'" + damaged.string() + "'");
  ASSERT_EQ(added.status, 0) << added.out;
  ASSERT_NO_FATAL_FAILURE(wait_task());
  EXPECT_EQ(status()["state"], "clean");
  ASSERT_NO_FATAL_FAILURE(expect_files());

  done = fs_.unmount();
  ASSERT_TRUE(done) << done.error();
  const auto wiped = fs_.members()[1];
  ASSERT_NO_FATAL_FAILURE(damage_superblock(wiped, 0, 4096, 0));
  done = fs_.mount();
  ASSERT_FALSE(done) << "a device without a superblock is refused";
  EXPECT_NE(done.error().find("force starts the array without it"), std::string::npos)
      << done.error();
  fs_.set_mount_options("force");
  done = fs_.mount();
  ASSERT_TRUE(done) << done.error();
  EXPECT_EQ(status()["state"], "degraded");
  ASSERT_NO_FATAL_FAILURE(expect_files());
}

// Bad requests get a one-line error and change nothing; only root is answered.
TEST_F(Operations, RefusedRequestsChangeNothing) {
  ASSERT_NO_FATAL_FAILURE(start({"5", 4}));
  const nlohmann::json before = status();
  struct Refusal {
    std::string command, args, says;
  };
  const auto small = device("small.img");
  ASSERT_EQ(truncate(small.c_str(), 8 * kMiB), 0);
  const auto foreign = device("foreign.img");
  const auto foreign2 = device("foreign2.img");
  {
    const std::string mkfs = std::string(STRIPEFS_MKFS_PATH) + " -q -l 1 -n 2 " + foreign.string() +
                             " " + foreign2.string() + " >/dev/null 2>&1";
    ASSERT_EQ(std::system(mkfs.c_str()), 0);
  }
  const Refusal refusals[] = {
      {"fail", "7", "the array has 4 members"},
      {"fail", "/nonexistent", "not a member"},
      {"add", "'" + small.string() + "'", "too small"},
      {"add", "'" + foreign.string() + "'", "another stripefs array"},
      {"add", "'" + fs_.members()[1].string() + "'", "role 1 of this array already"},
      {"add", "/nonexistent", "/nonexistent"},
      {"remove", "2", "in service"},
      {"rebuild", "", "nothing to rebuild"},
      {"speed", "--min 1x", "min"},
      {"speed", "--min 8M --max 4M", "above max"},
      {"log-level", "loud", "log level 'loud'"},
  };
  for (const Refusal& r : refusals) {
    const Ctl said = ctl(r.command, r.args);
    EXPECT_EQ(said.status, 1) << r.command << " " << r.args << ": " << said.out;
    EXPECT_NE(said.out.find(r.says), std::string::npos)
        << r.command << " " << r.args << ": " << said.out;
    EXPECT_EQ(std::count(said.out.begin(), said.out.end(), '\n'), 1) << said.out;
  }
  ASSERT_EQ(ctl("fail", "0").status, 0);
  const Ctl beyond = ctl("fail", "1");
  EXPECT_NE(beyond.out.find("cannot run without it"), std::string::npos) << beyond.out;
  nlohmann::json after = status();
  EXPECT_EQ(after["members"][1]["state"], "active");
  EXPECT_EQ(after["members"].size(), before["members"].size()) << "no spare was kept";
  // A user that is not root cannot reach the socket.
  std::string program = STRIPEFSCTL_PATH;
  FILE* pipe = popen(("setpriv --reuid=65534 --regid=65534 --clear-groups " + program + " status " +
                      mnt() + " 2>&1")
                         .c_str(),
                     "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buffer[1024];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, n);
  const int status = pclose(pipe);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("permission denied"), std::string::npos) << out;
}

}  // namespace
}  // namespace stripefs::test
