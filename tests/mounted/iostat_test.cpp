// stripefsctl iostat on a mounted stripefs: streaming writes show as full stripes in large
// member requests, small direct reads as 4 KiB ones, and the command line reports once or
// per interval and refuses bad intervals in one line.
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>

#include "mounted/array_check.hpp"
#include "mounted/command.hpp"
#include "mounted/mounted_fixture.hpp"

namespace stripefs::test {
namespace {

// stripefsctl with `args`, its output and errors together.
Command stripefsctl(const std::string& args) {
  const char* program = std::getenv("STRIPEFSCTL_PATH");
  return run(std::string(program != nullptr ? program : STRIPEFSCTL_PATH) + " " + args + " 2>&1");
}

// Sum over the members of what `get` reads from each, in `after` minus `before`.
template <class Get>
uint64_t member_delta(const nlohmann::json& after, const nlohmann::json& before, Get get) {
  uint64_t total = 0;
  for (size_t i = 0; i < after["members"].size(); ++i) {
    total += get(after["members"][i]) - get(before["members"][i]);
  }
  return total;
}

// 64 KiB chunks: a member's chunks of consecutive stripes merge into one request, up to the
// device's largest.
class Iostat : public MountedTest {
 protected:
  void SetUp() override {
    fs_.set_mkfs_arguments({"-c", "64K"});
    MountedTest::SetUp();
  }
};

TEST_F(Iostat, StreamingWritesShowAsFullStripesInLargeRequests) {
  if (!fs_.can_remount()) GTEST_SKIP() << "needs the stripefs daemon";
  auto before = daemon_query(fs_.root().string(), "iostat");
  ASSERT_TRUE(before) << before.error();
  Fd fd = open_file(path("stream"), O_WRONLY | O_CREAT | O_TRUNC);
  ASSERT_TRUE(fd.valid());
  const Bytes chunk = random_bytes(kMiB, 5);
  for (uint64_t i = 0; i < 48; ++i) ASSERT_TRUE(write_at(fd.get(), chunk, i * kMiB));
  ASSERT_SYS(fsync(fd.get()));
  auto after = daemon_query(fs_.root().string(), "iostat");
  ASSERT_TRUE(after) << after.error();

  const uint64_t writes = member_delta(*after, *before, [](const nlohmann::json& m) {
    return m["write"]["requests"].get<uint64_t>();
  });
  const uint64_t large = member_delta(*after, *before, [](const nlohmann::json& m) {
    uint64_t n = 0;
    for (const char* size : {"64K", "128K", "256K", "512K", "1M", ">1M"}) {
      n += m["write"]["sizes"][size].get<uint64_t>();
    }
    return n;
  });
  const uint64_t written = member_delta(
      *after, *before, [](const nlohmann::json& m) { return m["write"]["bytes"].get<uint64_t>(); });
  const uint64_t merged = member_delta(*after, *before, [](const nlohmann::json& m) {
    return m["write"]["merged"].get<uint64_t>();
  });
  // A stripe's chunk and the next stripe's on one member go out as one request.
  EXPECT_GE(merged * 4, writes) << merged << " of " << writes << " member writes merged";
  // 48 MiB of data and a third more of parity, mostly in requests of 64 KiB and up (the
  // journals' and the bitmap's small writes are the rest).
  EXPECT_GE(written, 64 * kMiB);
  EXPECT_GE(large * 2, writes) << large << " of " << writes << " member writes were 64K+";
  const auto volume = [&](const char* key) {
    return (*after)["volume"][key].get<uint64_t>() - (*before)["volume"][key].get<uint64_t>();
  };
  const uint64_t full = volume("full_stripe_bytes");
  EXPECT_GE(full * 10, (full + volume("partial_stripe_bytes")) * 9) << "full-stripe share";
  // Only where the file's first and last stripes are shared: no more than 5% preread.
  EXPECT_LE(volume("preread_bytes") * 20, written) << volume("prereads") << " prereads";
  for (const auto& m : (*after)["members"]) {
    EXPECT_EQ(m["backend"], "file");
    EXPECT_GE(m["alignment_unit"].get<uint64_t>(), 4096u);
  }
}

TEST_F(Iostat, SmallDirectReadsShowAs4KRequests) {
  if (!fs_.can_remount()) GTEST_SKIP() << "needs the stripefs daemon";
  ASSERT_TRUE(write_file(path("small"), random_bytes(4 * kMiB, 6)));
  auto remounted = fs_.remount();  // nothing cached
  ASSERT_TRUE(remounted) << remounted.error();
  auto before = daemon_query(fs_.root().string(), "iostat");
  ASSERT_TRUE(before) << before.error();
  Fd fd = open_file(path("small"), O_RDONLY | O_DIRECT);
  ASSERT_TRUE(fd.valid());
  void* raw = nullptr;
  ASSERT_EQ(posix_memalign(&raw, 4096, 4096), 0);
  std::unique_ptr<void, decltype(&free)> buffer(raw, &free);
  constexpr uint64_t kReads = 200;
  for (uint64_t i = 0; i < kReads; ++i) {
    const off_t at = static_cast<off_t>((i * 97) % 1024 * 4096);
    ASSERT_EQ(pread(fd.get(), buffer.get(), 4096, at), 4096) << strerror(errno);
  }
  auto after = daemon_query(fs_.root().string(), "iostat");
  ASSERT_TRUE(after) << after.error();
  const uint64_t small = member_delta(*after, *before, [](const nlohmann::json& m) {
    return m["read"]["sizes"]["4K"].get<uint64_t>();
  });
  EXPECT_GE(small, kReads / 2) << "4 KiB member reads";
}

TEST_F(Iostat, ReportsOnceOrPerIntervalAndRefusesBadIntervals) {
  if (!fs_.can_remount()) GTEST_SKIP() << "needs the stripefs daemon";
  const std::string mnt = "'" + fs_.root().string() + "'";
  const Command once = stripefsctl("iostat " + mnt);
  ASSERT_EQ(once.status, 0) << once.output;
  for (const char* text : {"since the mount:", "read request sizes:", "write request sizes:",
                           "volume:", "full-stripe writes", "member0.img"}) {
    EXPECT_NE(once.output.find(text), std::string::npos) << text << " in:\n" << once.output;
  }

  const Command twice = stripefsctl("--json iostat --interval 0.2 --count 2 " + mnt);
  ASSERT_EQ(twice.status, 0) << twice.output;
  std::istringstream lines(twice.output);
  std::string line;
  int reports = 0;
  while (std::getline(lines, line)) {
    ++reports;
    const auto report = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(report.is_discarded()) << line;
    EXPECT_TRUE(report["volume"].contains("full_stripe_fraction")) << line;
    EXPECT_EQ(report["members"].size(), MountedFs::kMembers);
    EXPECT_EQ(report["members"][1]["role"], 1);  // the role is not a counter
  }
  EXPECT_EQ(reports, 2);

  for (const auto& [args, named] : {std::pair{"iostat --interval 0 ", "--interval 0"},
                                    std::pair{"iostat --interval -1 ", "--interval -1"},
                                    std::pair{"iostat --count 2 ", "--count goes with --interval"},
                                    std::pair{"iostat --interval 1 --count 0 ", "--count 0"}}) {
    const Command refused = stripefsctl(args + mnt);
    EXPECT_EQ(refused.status, 1) << args << refused.output;
    EXPECT_NE(refused.output.find(named), std::string::npos) << refused.output;
    EXPECT_EQ(refused.output.find('\n'), refused.output.size() - 1) << refused.output;
  }
}

}  // namespace
}  // namespace stripefs::test
