// PowerCutMember: what a power cut keeps and loses, and that reads never see the difference
// before it.
#include "raid/power_cut_member.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "raid/memory_member.hpp"

namespace stripefs {
namespace {

constexpr uint64_t kBlock = 4096;

std::vector<std::byte> filled(size_t size, uint8_t value) {
  return std::vector<std::byte>(size, std::byte{value});
}

void write(Member& m, uint64_t offset, size_t size, uint8_t value, bool fua = false) {
  auto data = filled(size, value);
  ASSERT_TRUE(member_write(m, offset, data, fua));
}

// The byte every 4 KiB block of [offset, offset + size) holds on the medium, one per block.
std::vector<uint8_t> blocks_of(MemoryMember& medium, uint64_t offset, size_t size) {
  std::vector<uint8_t> out;
  for (uint64_t at = offset; at < offset + size; at += kBlock) {
    const auto first = static_cast<uint8_t>(medium.contents()[at]);
    for (uint64_t i = 0; i < kBlock; ++i) {
      EXPECT_EQ(static_cast<uint8_t>(medium.contents()[at + i]), first) << "torn inside a block";
    }
    out.push_back(first);
  }
  return out;
}

TEST(PowerCutMember, ReadsSeeEveryWriteAndTheDeviceAsksForFlushes) {
  MemoryMember medium("m", 1 << 20);
  PowerCutMember device(medium);
  EXPECT_TRUE(device.limits().volatile_cache);
  write(device, 0, 3 * kBlock, 0x11);
  write(device, kBlock, kBlock, 0x22);
  std::vector<std::byte> back(3 * kBlock);
  ASSERT_TRUE(member_read(device, 0, back));
  EXPECT_EQ(back[0], std::byte{0x11});
  EXPECT_EQ(back[kBlock], std::byte{0x22});
  EXPECT_EQ(back[2 * kBlock], std::byte{0x11});
  EXPECT_EQ(device.volatile_writes(), 2u);
}

TEST(PowerCutMember, ACutLosesWhatWasNotFlushedAndKeepsWhatWas) {
  MemoryMember medium("m", 1 << 20);
  PowerCutMember device(medium);
  write(device, 0, 2 * kBlock, 0x11);
  ASSERT_TRUE(member_flush(device));
  EXPECT_EQ(device.volatile_writes(), 0u);
  write(device, kBlock, 2 * kBlock, 0x22);
  write(device, 2 * kBlock, kBlock, 0x33);
  EXPECT_EQ(device.power_off(), 3u);  // block 1 once, block 2 twice
  EXPECT_EQ(blocks_of(medium, 0, 4 * kBlock), (std::vector<uint8_t>{0x11, 0x11, 0x00, 0x00}));
}

TEST(PowerCutMember, AFuaWriteSurvivesAndOlderLostWritesDoNotUndoIt) {
  MemoryMember medium("m", 1 << 20);
  PowerCutMember device(medium);
  write(device, 0, 2 * kBlock, 0x11);         // volatile
  write(device, kBlock, kBlock, 0x22, true);  // durable, over half of it
  write(device, 2 * kBlock, kBlock, 0x33, true);
  device.power_off();
  EXPECT_EQ(blocks_of(medium, 0, 3 * kBlock), (std::vector<uint8_t>{0x00, 0x22, 0x33}));
}

TEST(PowerCutMember, TheDeviceIsDeadAfterTheCut) {
  MemoryMember medium("m", 1 << 20);
  PowerCutMember device(medium);
  device.power_off();
  auto data = filled(kBlock, 0x44);
  EXPECT_FALSE(member_write(device, 0, data));
  EXPECT_FALSE(member_read(device, 0, data));
  EXPECT_FALSE(member_flush(device));
  EXPECT_EQ(blocks_of(medium, 0, kBlock), (std::vector<uint8_t>{0x00}));
}

// A frozen device stops answering: the array above never hears of a failure to record.
TEST(PowerCutMember, AfterAFreezeRequestsAreNeverAnsweredNorReachTheMedium) {
  MemoryMember medium("m", 1 << 20);
  PowerCutMember device(medium);
  write(device, 0, kBlock, 0x11);
  device.freeze();
  auto data = filled(kBlock, 0x55);
  bool answered = false;
  MemberRequest request;
  request.op = MemberOp::write;
  request.iov.push_back({data.data(), data.size()});
  request.done = [&answered](int64_t) { answered = true; };
  device.submit(std::move(request));
  EXPECT_FALSE(answered);
  EXPECT_EQ(device.power_off(), 1u);
  EXPECT_FALSE(answered);
  EXPECT_EQ(blocks_of(medium, 0, kBlock), (std::vector<uint8_t>{0x00}));
}

// A freeze the power outlives: what it held goes on, in order, and a flush among it makes
// what came before durable.
TEST(PowerCutMember, AThawedDeviceCarriesOutWhatItHeld) {
  MemoryMember medium("m", 1 << 20);
  PowerCutMember device(medium);
  device.freeze();
  auto first = filled(kBlock, 0x11), second = filled(kBlock, 0x22);
  std::vector<int64_t> answers;
  for (auto* data : {&first, &second}) {
    MemberRequest request;
    request.op = MemberOp::write;
    request.offset = 0;
    request.iov.push_back({data->data(), data->size()});
    request.done = [&answers](int64_t r) { answers.push_back(r); };
    device.submit(std::move(request));
  }
  MemberRequest flush;
  flush.op = MemberOp::flush;
  flush.done = [&answers](int64_t r) { answers.push_back(r); };
  device.submit(std::move(flush));
  EXPECT_TRUE(answers.empty());
  EXPECT_EQ(blocks_of(medium, 0, kBlock), (std::vector<uint8_t>{0x00}));
  device.thaw();
  ASSERT_EQ(answers.size(), 3u);
  EXPECT_EQ(answers[0], static_cast<int64_t>(kBlock));
  EXPECT_EQ(answers[1], static_cast<int64_t>(kBlock));
  EXPECT_GE(answers[2], 0);
  EXPECT_EQ(device.volatile_writes(), 0u);
  EXPECT_EQ(device.power_off(), 0u);
  EXPECT_EQ(blocks_of(medium, 0, kBlock), (std::vector<uint8_t>{0x22})) << "the later write";
}

// With half the blocks surviving, every block ends as one of the writes that touched it or
// the flushed contents, a newer kept write always wins over older ones, and across many
// seeds both a newer write lost over an older kept one and the reverse happen.
TEST(PowerCutMember, ATornCutLeavesEachBlockAsSomeWriteLeftIt) {
  constexpr size_t kBlocks = 16;
  bool older_kept_newer_lost = false, newer_kept = false, all_lost = false;
  for (uint64_t seed = 1; seed <= 64; ++seed) {
    MemoryMember medium("m", 1 << 20);
    PowerCutMember device(medium);
    write(device, 0, kBlocks * kBlock, 0x10);  // flushed base
    ASSERT_TRUE(member_flush(device));
    write(device, 0, kBlocks * kBlock, 0x20);      // write 0
    write(device, 0, kBlocks * kBlock / 2, 0x30);  // write 1, the first half
    device.power_off(0.5, seed);
    const auto after = blocks_of(medium, 0, kBlocks * kBlock);
    for (size_t b = 0; b < kBlocks; ++b) {
      const uint8_t v = after[b];
      if (b < kBlocks / 2) {
        ASSERT_TRUE(v == 0x10 || v == 0x20 || v == 0x30) << "seed " << seed << " block " << b;
        older_kept_newer_lost |= v == 0x20;
        newer_kept |= v == 0x30;
        all_lost |= v == 0x10;
      } else {
        ASSERT_TRUE(v == 0x10 || v == 0x20) << "seed " << seed << " block " << b;
      }
    }
  }
  EXPECT_TRUE(older_kept_newer_lost);
  EXPECT_TRUE(newer_kept);
  EXPECT_TRUE(all_lost);
}

// The same seed gives the same cut: a failing crash test can be replayed.
TEST(PowerCutMember, TheSameSeedCutsTheSameBlocks) {
  std::vector<uint8_t> first;
  for (int round = 0; round < 2; ++round) {
    MemoryMember medium("m", 1 << 20);
    PowerCutMember device(medium);
    write(device, 0, 32 * kBlock, 0x20);
    device.power_off(0.5, 7);
    auto after = blocks_of(medium, 0, 32 * kBlock);
    if (round == 0) {
      first = after;
    } else {
      EXPECT_EQ(after, first);
    }
  }
}

}  // namespace
}  // namespace stripefs
