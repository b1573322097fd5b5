// stripefsctl iostat's arithmetic: differences between two answers, and the ratios derived.
#include "fs/daemon/iostat_view.hpp"

#include <gtest/gtest.h>

namespace stripefs::fs {
namespace {

using nlohmann::json;

json answer(uint64_t reads, uint64_t full_bytes, uint64_t partial_bytes, uint64_t logged) {
  return {{"members", json::array({{{"role", 3u},
                                    {"alignment_unit", 4096u},
                                    {"path", "/dev/a"},
                                    {"read", {{"requests", reads}, {"sizes", {{"4K", reads}}}}}}})},
          {"volume",
           {{"full_stripe_bytes", full_bytes},
            {"partial_stripe_bytes", partial_bytes},
            {"preread_bytes", partial_bytes * 2},
            {"logged_bytes", logged}}},
          {"io", {{"engine_requests", 10}, {"engine_fixed_requests", 4}}}};
}

TEST(IostatView, DeltaSubtractsEveryCounterAndKeepsNames) {
  const json d = iostat_delta(answer(150, 3000, 1000, 500), answer(100, 1000, 0, 0));
  EXPECT_EQ(d["members"][0]["read"]["requests"], 50u);
  EXPECT_EQ(d["members"][0]["read"]["sizes"]["4K"], 50u);
  EXPECT_EQ(d["members"][0]["path"], "/dev/a");
  EXPECT_EQ(d["members"][0]["role"], 3u);  // names the member: kept
  EXPECT_EQ(d["members"][0]["alignment_unit"], 4096u);
  EXPECT_EQ(d["volume"]["full_stripe_bytes"], 2000u);
  EXPECT_EQ(d["io"]["engine_requests"], 0u);
}

TEST(IostatView, ARoleWhoseDeviceChangedCountsTheNewDeviceWhole) {
  json before = answer(100, 0, 0, 0), now = answer(30, 0, 0, 0);
  now["members"][0]["path"] = "/dev/b";
  const json d = iostat_delta(now, before);
  EXPECT_EQ(d["members"][0]["read"]["requests"], 30u);
  EXPECT_EQ(d["members"][0]["path"], "/dev/b");
}

TEST(IostatView, ACounterThatWentBackCountsZero) {
  const json d = iostat_delta(answer(5, 0, 0, 0), answer(100, 0, 0, 0));
  EXPECT_EQ(d["members"][0]["read"]["requests"], 0u);
}

TEST(IostatView, RatiosOfTheBytesWritten) {
  json s = answer(0, 3000, 1000, 500);
  add_iostat_ratios(s);
  EXPECT_DOUBLE_EQ(s["volume"]["full_stripe_fraction"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(s["volume"]["preread_bytes_per_byte"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(s["volume"]["logged_bytes_per_byte"].get<double>(), 0.125);
  EXPECT_DOUBLE_EQ(s["io"]["fixed_fraction"].get<double>(), 0.4);
}

// Requests on the workers' own rings count with the engine's: 4 + 26 fixed of 10 + 30.
TEST(IostatView, TheFixedFractionCountsTheWorkersRingsToo) {
  json s = answer(0, 0, 0, 0);
  s["io"]["local_ring_requests"] = 30;
  s["io"]["local_ring_fixed_requests"] = 26;
  add_iostat_ratios(s);
  EXPECT_DOUBLE_EQ(s["io"]["fixed_fraction"].get<double>(), 0.75);
}

TEST(IostatView, NothingWrittenGivesZeroRatios) {
  json s = answer(0, 0, 0, 0);
  s["io"]["engine_requests"] = 0;
  add_iostat_ratios(s);
  EXPECT_EQ(s["volume"]["full_stripe_fraction"].get<double>(), 0.0);
  EXPECT_EQ(s["volume"]["logged_bytes_per_byte"].get<double>(), 0.0);
  EXPECT_EQ(s["io"]["fixed_fraction"].get<double>(), 0.0);
}

// The table names each member's alignment unit in its own size: a loop device's 512 bytes
// is not "0K".
TEST(IostatView, TheTableShowsEachAlignmentUnitInItsSize) {
  json s = answer(5, 0, 0, 0);
  json second = s["members"][0], third = s["members"][0];
  s["members"][0]["alignment_unit"] = 512u;
  second["alignment_unit"] = 65536u;
  third["alignment_unit"] = 1u << 20;
  s["members"].push_back(second);
  s["members"].push_back(third);
  testing::internal::CaptureStdout();
  print_iostat(s, "since the mount:");
  const std::string table = testing::internal::GetCapturedStdout();
  EXPECT_NE(table.find("/dev/a                      512"), std::string::npos) << table;
  EXPECT_NE(table.find("/dev/a                      64K"), std::string::npos) << table;
  EXPECT_NE(table.find("/dev/a                       1M"), std::string::npos) << table;
  EXPECT_EQ(table.find("0K"), std::string::npos) << table;
}

}  // namespace
}  // namespace stripefs::fs
