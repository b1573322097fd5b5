#include "raid/member_set.hpp"

#include <gtest/gtest.h>

#include "unit/raid/test_util.hpp"

namespace stripefs {
namespace {

TEST(MemberSet, MissingMembersAreNeverInService) {
  test::MemoryArray media(3, 1 << 20);
  std::vector<Member*> members = media.members();
  members[1] = nullptr;
  MemberSet set(members);
  EXPECT_TRUE(set.active(0));
  EXPECT_FALSE(set.active(1));
  EXPECT_EQ(set.missing(), 1u);
  set.restore(1);  // nothing to put back
  EXPECT_FALSE(set.active(1));
  set.hold_out(2);
  EXPECT_FALSE(set.active(2));
  EXPECT_EQ(set.missing(), 2u);
  set.restore(2);
  EXPECT_TRUE(set.active(2));
}

// A failure is heard once, and what waits for failures to be recorded waits until it is.
TEST(MemberSet, HoldsContinuationsUntilTheFailureIsRecorded) {
  test::MemoryArray media(3, 1 << 20);
  MemberSet set(media.members());
  std::vector<unsigned> heard;
  set.set_failure_listener([&](unsigned member, const Error&) { heard.push_back(member); });
  bool ran = false;
  set.after_failures_recorded([&] { ran = true; });
  EXPECT_TRUE(ran) << "nothing unrecorded: runs at once";

  set.note_failures({FailedIo{1, 0, EIO}, FailedIo{1, 7, EIO}});
  set.fail(1, Error{EIO, "again"});
  EXPECT_EQ(heard, std::vector<unsigned>{1});
  EXPECT_FALSE(set.active(1));
  ran = false;
  set.after_failures_recorded([&] { ran = true; });
  EXPECT_FALSE(ran) << "held while the failure of member 1 is not recorded";
  set.failure_recorded(1);
  EXPECT_TRUE(ran);
}

TEST(MemberSet, WithoutAListenerNothingIsHeld) {
  test::MemoryArray media(2, 1 << 20);
  MemberSet set(media.members());
  set.fail(0, Error{EIO, "gone"});
  bool ran = false;
  set.after_failures_recorded([&] { ran = true; });
  EXPECT_TRUE(ran);
  EXPECT_EQ(set.missing(), 1u);
}

}  // namespace
}  // namespace stripefs
