#include "raid/geometry.hpp"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace stripefs {
namespace {

struct Case {
  RaidLevel level;
  unsigned members;
  ParityLayout layout;
};

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (unsigned n = 1; n <= 5; ++n) cases.push_back({RaidLevel::raid0, n, {}});
  for (unsigned n = 2; n <= 4; ++n) cases.push_back({RaidLevel::raid1, n, {}});
  for (unsigned n = 2; n <= 7; ++n) cases.push_back({RaidLevel::raid10, n, {}});
  for (unsigned layout = 0; layout < 4; ++layout) {
    for (unsigned n = 3; n <= 7; ++n) {
      cases.push_back({RaidLevel::raid5, n, static_cast<ParityLayout>(layout)});
    }
    for (unsigned n = 4; n <= 8; ++n) {
      cases.push_back({RaidLevel::raid6, n, static_cast<ParityLayout>(layout)});
    }
  }
  return cases;
}

// Every 512-byte block of the volume maps to distinct member blocks that map back to it,
// and every member block holds exactly one thing (a data block's copy, or parity).
TEST(Geometry, EveryBlockRoundTripsForEveryLevel) {
  constexpr uint32_t kChunk = 4096;
  constexpr uint64_t kBlock = 512;
  for (const Case& c : all_cases()) {
    SCOPED_TRACE(
        fmt::format("{} x{} layout {}", to_string(c.level), c.members, to_string(c.layout)));
    const uint64_t rows = 2 * c.members + 3;
    auto g = Geometry::create(c.level, c.members, kChunk, rows * kChunk, c.layout);
    ASSERT_TRUE(g) << g.error().message;
    std::map<std::pair<unsigned, uint64_t>, uint64_t> owner;  // member block -> volume block
    for (uint64_t v = 0; v < g->volume_size(); v += kBlock) {
      const uint64_t stripe = v / g->stripe_data_size();
      const unsigned index = static_cast<unsigned>(v % g->stripe_data_size() / kChunk);
      std::set<unsigned> members_used;
      for (unsigned copy = 0; copy < g->copies(); ++copy) {
        const ChunkLocation at = g->locate(stripe, index, copy);
        ASSERT_LT(at.member, c.members);
        const uint64_t member_offset = at.member_offset + v % kChunk;
        ASSERT_LT(member_offset, g->member_data_size());
        auto back = g->volume_offset(at.member, member_offset);
        ASSERT_TRUE(back.has_value());
        EXPECT_EQ(*back, v);
        EXPECT_TRUE(owner.emplace(std::pair{at.member, member_offset}, v).second)
            << "member block used twice";
        members_used.insert(at.member);
      }
      EXPECT_EQ(members_used.size(), g->copies()) << "copies must be on distinct members";
    }
    // Parity blocks: exactly the member blocks no data uses, parity_chunks per stripe row.
    uint64_t parity_blocks = 0;
    for (unsigned m = 0; m < c.members; ++m) {
      for (uint64_t mo = 0; mo < g->member_data_size(); mo += kBlock) {
        auto role = g->role(m, mo);
        if (!role) continue;
        const bool is_parity = role->kind == MemberRole::p || role->kind == MemberRole::q;
        EXPECT_EQ(is_parity, !owner.contains({m, mo}));
        parity_blocks += is_parity ? 1 : 0;
      }
    }
    EXPECT_EQ(parity_blocks, g->stripes() * g->parity_chunks() * (kChunk / kBlock));
    if (g->has_parity()) {
      for (uint64_t s = 0; s < g->stripes(); ++s) {
        EXPECT_EQ(g->role(g->p_member(s), s * kChunk)->kind, MemberRole::p);
        if (g->parity_chunks() == 2) {
          EXPECT_EQ(g->role(g->q_member(s), s * kChunk)->kind, MemberRole::q);
          EXPECT_NE(g->p_member(s), g->q_member(s));
        }
      }
    }
  }
}

// md's documented left-symmetric RAID5 on four disks:
//   stripe 0: D0 D1 D2 P / stripe 1: D1 D2 P D0 / stripe 2: D2 P D0 D1 / stripe 3: P D0 D1 D2
TEST(Geometry, Raid5LeftSymmetricMatchesMd) {
  auto g = Geometry::create(RaidLevel::raid5, 4, 4096, 16 * 4096);
  ASSERT_TRUE(g);
  const int expected[4][4] = {{0, 1, 2, -1}, {1, 2, -1, 0}, {2, -1, 0, 1}, {-1, 0, 1, 2}};
  for (unsigned s = 0; s < 4; ++s) {
    for (unsigned m = 0; m < 4; ++m) {
      auto role = g->role(m, s * 4096);
      ASSERT_TRUE(role);
      if (expected[s][m] < 0) {
        EXPECT_EQ(role->kind, MemberRole::p) << "stripe " << s << " member " << m;
      } else {
        EXPECT_EQ(role->kind, MemberRole::data);
        EXPECT_EQ(role->data_index, static_cast<unsigned>(expected[s][m]));
      }
    }
  }
}

// md's left-symmetric RAID6: P walks left from the last disk, Q follows P, data after Q.
TEST(Geometry, Raid6LeftSymmetricMatchesMd) {
  auto g = Geometry::create(RaidLevel::raid6, 5, 4096, 16 * 4096);
  ASSERT_TRUE(g);
  for (unsigned s = 0; s < 10; ++s) {
    const unsigned pd = 4 - s % 5;
    EXPECT_EQ(g->p_member(s), pd);
    EXPECT_EQ(g->q_member(s), (pd + 1) % 5);
    for (unsigned d = 0; d < 3; ++d) EXPECT_EQ(g->locate(s, d).member, (pd + 2 + d) % 5);
  }
}

TEST(Geometry, Raid10NearTwoMatchesMd) {
  // Three disks, near=2:  A A B / B C C / D D E ...
  auto g = Geometry::create(RaidLevel::raid10, 3, 4096, 8 * 4096);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->locate(0, 0, 0).member, 0u);
  EXPECT_EQ(g->locate(0, 0, 1).member, 1u);
  EXPECT_EQ(g->locate(1, 0, 0).member, 2u);
  EXPECT_EQ(g->locate(1, 0, 1).member, 0u);
  EXPECT_EQ(g->locate(1, 0, 1).member_offset, 4096u);
  EXPECT_EQ(g->stripes(), 12u);
}

TEST(Geometry, SizesAndRedundancy) {
  auto r5 = Geometry::create(RaidLevel::raid5, 4, 65536, 10 * 65536 + 100);
  ASSERT_TRUE(r5);
  EXPECT_EQ(r5->volume_size(), 10u * 3 * 65536);
  EXPECT_EQ(r5->redundancy(), 1u);
  auto r6 = Geometry::create(RaidLevel::raid6, 6, 65536, 10 * 65536);
  EXPECT_EQ(r6->volume_size(), 10u * 4 * 65536);
  EXPECT_EQ(r6->redundancy(), 2u);
  auto r1 = Geometry::create(RaidLevel::raid1, 3, 65536, 10 * 65536);
  EXPECT_EQ(r1->volume_size(), 10u * 65536);
  EXPECT_EQ(r1->redundancy(), 2u);
  auto r10 = Geometry::create(RaidLevel::raid10, 4, 65536, 10 * 65536);
  EXPECT_EQ(r10->volume_size(), 20u * 65536);
}

TEST(Geometry, RejectsBadParameters) {
  auto few = Geometry::create(RaidLevel::raid6, 3, 65536, 1 << 20);
  ASSERT_FALSE(few);
  EXPECT_NE(few.error().message.find("at least 4"), std::string::npos);
  EXPECT_FALSE(Geometry::create(RaidLevel::raid5, 4, 3 * 4096, 1 << 20));
  EXPECT_FALSE(Geometry::create(RaidLevel::raid5, 4, 2048, 1 << 20));
  EXPECT_FALSE(Geometry::create(RaidLevel::raid5, 4, 65536, 1000));
  EXPECT_FALSE(Geometry::create(RaidLevel::raid0, 65, 65536, 1 << 20));
  EXPECT_FALSE(parse_raid_level("7"));
  EXPECT_EQ(*parse_raid_level("raid10"), RaidLevel::raid10);
}

}  // namespace
}  // namespace stripefs
