// Data checksums on a mounted filesystem, at RAID1, 10, 5 and 6: a block of a file corrupted
// on each member in turn behind the array's back (unmounted, and while mounted with the caches
// dropped) reads right, the member's CKSUM count rises, and its chunk holds the right bytes
// again afterwards. On RAID5, two wrong chunks of one row give EIO for that block, never
// wrong bytes, and the rest of the file still reads. A scrub names a wrong block of file data
// or of a directory by its checksum.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "mounted/operations_fixture.hpp"

namespace stripefs::test {
namespace {

constexpr size_t kBlock = 4096;
// Whole stripes at every level tested (512 KiB chunks, at most 3 data chunks): in a row
// where one data chunk is written and the others are zero, P would equal that chunk.
constexpr size_t kDataSize = 12 * kMiB;

// Where a block of the file sits on a member (its data area), found by its contents.
struct Place {
  unsigned member;
  uint64_t offset;  // byte offset in the member file
  size_t block;     // file block
};

class ChecksumAtLevel : public Operations, public ::testing::WithParamInterface<Level> {
 protected:
  void SetUp() override {
    // direct_io: every read below reaches the daemon, so reads of one block alternate
    // between the copies of a mirror (the Volume spreads them), and each copy is checked.
    start(GetParam(), "direct_io");
    data_ = random_bytes(kDataSize, 77);
    Fd fd = open_file(path("f"), O_WRONLY | O_CREAT | O_TRUNC);
    ASSERT_TRUE(fd.valid());
    ASSERT_TRUE(write_at(fd.get(), data_, 0));
    ASSERT_EQ(fsync(fd.get()), 0);
  }
  // Every place on the members that holds a block of the file (copies included).
  std::vector<Place> places() {
    std::unordered_multimap<uint64_t, size_t> by_head;
    for (size_t b = 0; b < kDataSize / kBlock; ++b) {
      uint64_t head;
      std::memcpy(&head, data_.data() + b * kBlock, 8);
      by_head.emplace(head, b);
    }
    std::vector<Place> found;
    for (unsigned m = 0; m < fs_.members().size(); ++m) {
      auto data_offset = member_data_offset(fs_.members()[m]);
      EXPECT_TRUE(data_offset) << data_offset.error();
      if (!data_offset) return {};
      std::ifstream in(fs_.members()[m], std::ios::binary);
      Bytes piece(kMiB);
      for (uint64_t at = *data_offset;; at += piece.size()) {
        in.seekg(static_cast<std::streamoff>(at));
        in.read(reinterpret_cast<char*>(piece.data()), static_cast<std::streamsize>(piece.size()));
        const auto got = static_cast<size_t>(in.gcount());
        for (size_t i = 0; i + kBlock <= got; i += kBlock) {
          uint64_t head;
          std::memcpy(&head, piece.data() + i, 8);
          auto [lo, hi] = by_head.equal_range(head);
          for (auto it = lo; it != hi; ++it) {
            if (std::memcmp(piece.data() + i, data_.data() + it->second * kBlock, kBlock) == 0) {
              found.push_back({m, at + i, it->second});
            }
          }
        }
        if (got < piece.size()) break;
        in.clear();
      }
    }
    return found;
  }
  // Flips bytes of the block at `p` in its member file.
  void corrupt(const Place& p) {
    Fd fd = open_file(fs_.members()[p.member].string(), O_RDWR);
    ASSERT_TRUE(fd.valid());
    Bytes bytes(kBlock);
    ASSERT_EQ(pread(fd.get(), bytes.data(), kBlock, static_cast<off_t>(p.offset)), 4096);
    for (size_t i = 100; i < 400; ++i) bytes[i] ^= 0xa7;
    ASSERT_EQ(pwrite(fd.get(), bytes.data(), kBlock, static_cast<off_t>(p.offset)), 4096);
    ASSERT_EQ(fsync(fd.get()), 0);
  }
  bool holds_block(const Place& p) {
    Fd fd = open_file(fs_.members()[p.member].string(), O_RDONLY);
    Bytes bytes(kBlock);
    if (pread(fd.get(), bytes.data(), kBlock, static_cast<off_t>(p.offset)) != 4096) return false;
    return std::memcmp(bytes.data(), data_.data() + p.block * kBlock, kBlock) == 0;
  }
  uint64_t checksum_errors(unsigned role) {
    const nlohmann::json now = status();  // (not iterated as a temporary: it would die)
    for (const auto& m : now["members"]) {
      if (m["role"].is_number() && m["role"] == role) return m.value("checksum_errors", 0u);
    }
    return 0;
  }
  void drop_caches() {
    ::sync();
    std::ofstream("/proc/sys/vm/drop_caches") << "3\n";
  }
  // One place per member, each a different file block in a row of its own (two wrong
  // chunks of one row are more than RAID5 can tell apart).
  std::vector<Place> one_per_member() {
    const std::vector<Place> all = places();
    std::vector<Place> chosen;
    for (unsigned m = 0; m < fs_.members().size(); ++m) {
      for (const Place& p : all) {
        const bool row_taken = std::any_of(chosen.begin(), chosen.end(), [&](const Place& c) {
          return c.offset == p.offset || c.block == p.block;
        });
        if (p.member == m && p.block >= 64 * (m + 1) && !row_taken) {
          chosen.push_back(p);
          break;
        }
      }
    }
    return chosen;
  }
  // Reads the block at `p` once per copy (on a mirror, consecutive reads take the copies in
  // turn), checking each answer.
  void read_each_copy(const Place& p, unsigned copies) {
    Fd fd = open_file(path("f"), O_RDONLY);
    ASSERT_TRUE(fd.valid());
    for (unsigned i = 0; i < copies; ++i) {
      Bytes got(kBlock);
      ASSERT_EQ(pread(fd.get(), got.data(), kBlock, static_cast<off_t>(p.block * kBlock)), 4096);
      EXPECT_EQ(std::memcmp(got.data(), data_.data() + p.block * kBlock, kBlock), 0)
          << "file block " << p.block;
    }
  }
  // Unmounted, a block of the file on each member in turn corrupted (one_per_member), and
  // mounted again.
  void corrupt_one_per_member(std::vector<Place>& chosen) {
    const Status unmounted = fs_.unmount();
    ASSERT_TRUE(unmounted) << unmounted.error();
    chosen = one_per_member();
    ASSERT_EQ(chosen.size(), fs_.members().size()) << "some member holds no block of the file";
    for (const Place& p : chosen) ASSERT_NO_FATAL_FAILURE(corrupt(p));
    const Status mounted = fs_.mount();
    ASSERT_TRUE(mounted) << mounted.error();
  }
  // Unmounted: every chosen place holds its block again, and the stripes agree.
  void expect_rewritten(const std::vector<Place>& chosen) {
    const Status unmounted = fs_.unmount();
    ASSERT_TRUE(unmounted) << unmounted.error();
    for (const Place& p : chosen) {
      EXPECT_TRUE(holds_block(p)) << "member " << p.member << " was not rewritten";
    }
    ASSERT_NO_FATAL_FAILURE(expect_consistent(fs_.members()));
  }
  unsigned copies() const {
    const std::string level = GetParam().level;
    return level == "1" ? GetParam().members : level == "10" ? 2 : 1;
  }
  Bytes data_;
};

TEST_P(ChecksumAtLevel, AWrongBlockOnEachMemberInTurnReadsRightAndIsRewritten) {
  std::vector<Place> chosen;
  ASSERT_NO_FATAL_FAILURE(corrupt_one_per_member(chosen));

  for (const Place& p : chosen) ASSERT_NO_FATAL_FAILURE(read_each_copy(p, copies()));
  EXPECT_TRUE(same_bytes(read_file(path("f")), data_));
  for (unsigned m = 0; m < fs_.members().size(); ++m) {
    EXPECT_EQ(checksum_errors(m), 1u) << "role " << m;
  }
  auto stats = daemon_query(fs_.root().string(), "stats");
  ASSERT_TRUE(stats) << stats.error();
  EXPECT_EQ((*stats)["filesystem"]["checksum_recovered"], fs_.members().size());
  const Ctl human = ctl("status");
  EXPECT_NE(human.out.find("CKSUM"), std::string::npos) << human.out;
  EXPECT_EQ(status()["state"], "clean") << "a checksum error took a member out";

  ASSERT_NO_FATAL_FAILURE(expect_rewritten(chosen));
}

TEST_P(ChecksumAtLevel, AWrongBlockFoundWhileMountedReadsRightOnceTheCachesAreDropped) {
  // Found unmounted (the members are locked while mounted), corrupted while mounted.
  const Status unmounted = fs_.unmount();
  ASSERT_TRUE(unmounted) << unmounted.error();
  const std::vector<Place> chosen = one_per_member();
  ASSERT_FALSE(chosen.empty());
  const Place p = chosen.back();
  const Status mounted = fs_.mount();
  ASSERT_TRUE(mounted) << mounted.error();
  ASSERT_NO_FATAL_FAILURE(corrupt(p));
  drop_caches();
  ASSERT_NO_FATAL_FAILURE(read_each_copy(p, copies()));
  EXPECT_TRUE(same_bytes(read_file(path("f")), data_));
  EXPECT_EQ(checksum_errors(p.member), 1u);
  EXPECT_TRUE(holds_block(p));
}

// The scrub names each wrong block by its checksum, at every level (RAID5 and two copies
// included, where redundancy alone cannot tell which chunk is wrong), and repairs it; a
// second scrub is clean and the members hold the right bytes again.
TEST_P(ChecksumAtLevel, AScrubNamesAWrongBlockOnEachMemberByItsChecksumAndRepairsIt) {
  std::vector<Place> chosen;
  ASSERT_NO_FATAL_FAILURE(corrupt_one_per_member(chosen));

  const Ctl run = ctl("scrub start --repair --wait");
  EXPECT_EQ(run.status, 0) << run.out;
  EXPECT_NE(run.out.find("checked against their checksums"), std::string::npos) << run.out;
  const nlohmann::json scrub = status()["scrub"];
  ASSERT_TRUE(scrub.is_object()) << status().dump(2);
  EXPECT_EQ(scrub["checksums"], true);
  EXPECT_EQ(scrub["unrepairable"], 0) << scrub.dump(2);
  EXPECT_EQ(scrub["bad_data"], chosen.size()) << scrub.dump(2);
  EXPECT_EQ(scrub["bad_parity"], 0) << scrub.dump(2);
  EXPECT_EQ(scrub["checksum_failures"], chosen.size()) << scrub.dump(2);
  EXPECT_GE(scrub["verified_blocks"].get<uint64_t>(), kDataSize / kBlock * copies());
  EXPECT_GE(scrub["repaired"].get<uint64_t>(), 1u);
  ASSERT_EQ(scrub["bad_chunks"].size(), chosen.size()) << scrub.dump(2);
  for (const auto& bad : scrub["bad_chunks"]) EXPECT_EQ(bad["count"], 1) << scrub.dump(2);
  for (unsigned m = 0; m < fs_.members().size(); ++m) {
    EXPECT_EQ(checksum_errors(m), 1u) << "role " << m;
  }

  const Ctl again = ctl("scrub start --wait");
  EXPECT_EQ(again.status, 0) << again.out;
  const nlohmann::json clean = status()["scrub"];
  EXPECT_EQ(clean["mismatched"], 0) << clean.dump(2);
  EXPECT_EQ(clean["checksum_failures"], 0) << clean.dump(2);
  drop_caches();
  EXPECT_TRUE(same_bytes(read_file(path("f")), data_));
  ASSERT_NO_FATAL_FAILURE(expect_rewritten(chosen));
}

// Parity wrong beside file data that passes its checksums: the scrub names the parity (every
// parity chunk of the row, on RAID6: P and Q are the members that hold none of the row's
// data), rewrites it from the data, and the next scrub is clean.
TEST_P(ChecksumAtLevel, AScrubNamesWrongParityBesideGoodDataAndRewritesIt) {
  const std::string level = GetParam().level;
  if (level != "5" && level != "6") GTEST_SKIP() << "no parity at RAID" << level;
  const unsigned parity = level == "6" ? 2 : 1;
  const unsigned members = GetParam().members;
  const Status unmounted = fs_.unmount();
  ASSERT_TRUE(unmounted) << unmounted.error();
  // A row whose every data chunk holds file data: the members without a block there hold
  // its parity.
  std::map<uint64_t, std::set<unsigned>> rows;
  for (const Place& p : places()) rows[p.offset].insert(p.member);
  std::optional<uint64_t> row;
  for (const auto& [offset, holders] : rows) {
    if (holders.size() == members - parity) {
      row = offset;
      break;
    }
  }
  ASSERT_TRUE(row) << "no row of whole file data";
  std::vector<Place> parity_places;
  for (unsigned m = 0; m < members; ++m) {
    if (rows[*row].contains(m)) continue;
    parity_places.push_back({m, *row, 0});
    ASSERT_NO_FATAL_FAILURE(corrupt(parity_places.back()));
  }
  ASSERT_EQ(parity_places.size(), parity);
  const Status mounted = fs_.mount();
  ASSERT_TRUE(mounted) << mounted.error();
  const Ctl run = ctl("scrub start --repair --wait");
  EXPECT_EQ(run.status, 0) << run.out;
  const nlohmann::json scrub = status()["scrub"];
  EXPECT_EQ(scrub["bad_parity"], parity) << scrub.dump(2);
  EXPECT_EQ(scrub["bad_data"], 0) << scrub.dump(2);
  EXPECT_EQ(scrub["unrepairable"], 0) << scrub.dump(2);
  EXPECT_EQ(scrub["checksum_failures"], 0) << scrub.dump(2);
  EXPECT_EQ(scrub["repaired"], 1) << scrub.dump(2);
  const Ctl again = ctl("scrub start --wait");
  EXPECT_EQ(again.status, 0) << again.out;
  EXPECT_EQ(status()["scrub"]["mismatched"], 0);
  EXPECT_TRUE(same_bytes(read_file(path("f")), data_));
  const Status down = fs_.unmount();
  ASSERT_TRUE(down) << down.error();
  ASSERT_NO_FATAL_FAILURE(expect_consistent(fs_.members()));
}

// A directory block damaged on one member: the scrub names it by the checksum the block
// carries (metadata is checked like file data, where RAID5 parity alone names nothing),
// rewrites it, and the directory lists every name.
TEST_P(ChecksumAtLevel, AScrubNamesADamagedDirectoryBlockByItsOwnChecksum) {
  ASSERT_EQ(mkdir(path("d").c_str(), 0755), 0);
  std::vector<std::string> names;
  for (int i = 0; i < 40; ++i) {
    names.push_back("needle-entry-" + std::to_string(100 + i));
    Fd made = open_file(path("d/" + names.back()), O_WRONLY | O_CREAT);
    ASSERT_TRUE(made.valid());
  }
  const Status unmounted = fs_.unmount();
  ASSERT_TRUE(unmounted) << unmounted.error();
  // A copy of the directory block that holds a name, at its home: the journal holds images
  // of it too, and a parity chunk may equal it (a row with no other data). Its header says
  // which volume block it is (bytes 8-15).
  const std::string needle = names[7];
  std::optional<Place> at;
  for (unsigned m = 0; m < fs_.members().size() && !at; ++m) {
    std::ifstream in(fs_.members()[m], std::ios::binary);
    const std::string image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (size_t found = image.find(needle); found != std::string::npos && !at;
         found = image.find(needle, found + 1)) {
      const size_t block = found / kBlock * kBlock;
      if (image.compare(block, 4, "SDBK") != 0) continue;  // a bucket's magic, little-endian
      uint64_t self;
      std::memcpy(&self, image.data() + block + 8, 8);
      auto homes = volume_places(fs_.members(), self * kBlock);
      ASSERT_TRUE(homes) << homes.error();
      for (const MemberPlace& home : *homes) {
        if (home.member == m && home.offset == block) at = Place{m, block, 0};
      }
    }
  }
  ASSERT_TRUE(at) << "no member holds the directory's names";
  Bytes before(kBlock);
  {
    Fd fd = open_file(fs_.members()[at->member].string(), O_RDONLY);
    ASSERT_EQ(pread(fd.get(), before.data(), kBlock, static_cast<off_t>(at->offset)), 4096);
  }
  ASSERT_NO_FATAL_FAILURE(corrupt(*at));
  const Status mounted = fs_.mount();
  ASSERT_TRUE(mounted) << mounted.error();

  const Ctl run = ctl("scrub start --repair --wait");
  EXPECT_EQ(run.status, 0) << run.out;
  const nlohmann::json scrub = status()["scrub"];
  EXPECT_EQ(scrub["bad_data"], 1) << scrub.dump(2);
  EXPECT_EQ(scrub["checksum_failures"], 1) << scrub.dump(2);
  EXPECT_EQ(scrub["unrepairable"], 0) << scrub.dump(2);
  EXPECT_EQ(scrub["repaired"], 1) << scrub.dump(2);
  ASSERT_EQ(scrub["bad_chunks"].size(), 1u) << scrub.dump(2);
  EXPECT_EQ(scrub["bad_chunks"][0]["role"], at->member) << scrub.dump(2);
  const Ctl again = ctl("scrub start --wait");
  EXPECT_EQ(again.status, 0) << again.out;
  EXPECT_EQ(status()["scrub"]["mismatched"], 0);
  std::vector<std::string> listed;
  for (const std::string& name : list_dir(path("d"))) {
    if (name != "." && name != "..") listed.push_back(name);
  }
  std::sort(listed.begin(), listed.end());
  EXPECT_EQ(listed, names);
  const Status down = fs_.unmount();
  ASSERT_TRUE(down) << down.error();
  Fd fd = open_file(fs_.members()[at->member].string(), O_RDONLY);
  Bytes after(kBlock);
  ASSERT_EQ(pread(fd.get(), after.data(), kBlock, static_cast<off_t>(at->offset)), 4096);
  EXPECT_TRUE(same_bytes(after, before)) << "the block was not rewritten";
}

INSTANTIATE_TEST_SUITE_P(, ChecksumAtLevel,
                         testing::Values(Level{"1", 2}, Level{"10", 4}, Level{"5", 4},
                                         Level{"6", 5}),
                         [](const testing::TestParamInfo<Level>& info) {
                           return std::string("raid") + info.param.level;
                         });

// RAID5: two data chunks of one row wrong. Parity can rebuild neither, so their blocks read
// as EIO, not as wrong bytes; the rest of the file reads, and nothing is rewritten.
class ChecksumEio : public ChecksumAtLevel {};

TEST_P(ChecksumEio, TwoWrongChunksOfOneRowAreEioNotWrongBytes) {
  const Status unmounted = fs_.unmount();
  ASSERT_TRUE(unmounted) << unmounted.error();
  // Two blocks at the same member offset on two members: the same row of one stripe.
  const std::vector<Place> all = places();
  std::optional<std::pair<Place, Place>> pair;
  for (size_t i = 0; i < all.size() && !pair; ++i) {
    for (size_t j = i + 1; j < all.size(); ++j) {
      if (all[i].offset == all[j].offset && all[i].member != all[j].member) {
        pair = {all[i], all[j]};
        break;
      }
    }
  }
  ASSERT_TRUE(pair) << "no row holds two blocks of the file";
  ASSERT_NO_FATAL_FAILURE(corrupt(pair->first));
  ASSERT_NO_FATAL_FAILURE(corrupt(pair->second));
  const Status mounted = fs_.mount();
  ASSERT_TRUE(mounted) << mounted.error();

  Fd fd = open_file(path("f"), O_RDONLY);
  ASSERT_TRUE(fd.valid());
  for (const Place& p : {pair->first, pair->second}) {
    Bytes got(kBlock);
    errno = 0;
    EXPECT_EQ(pread(fd.get(), got.data(), kBlock, static_cast<off_t>(p.block * kBlock)), -1)
        << "file block " << p.block << " read without an error";
    EXPECT_EQ(errno, EIO);
  }
  // A block of another stripe still reads.
  const size_t other = (pair->first.block + kDataSize / kBlock / 2) % (kDataSize / kBlock);
  Bytes got(kBlock);
  ASSERT_EQ(pread(fd.get(), got.data(), kBlock, static_cast<off_t>(other * kBlock)), 4096);
  EXPECT_EQ(std::memcmp(got.data(), data_.data() + other * kBlock, kBlock), 0);
  auto stats = daemon_query(fs_.root().string(), "stats");
  ASSERT_TRUE(stats) << stats.error();
  EXPECT_GE((*stats)["filesystem"]["checksum_unrecoverable"].get<uint64_t>(), 1u);
  fd.reset();
  const Status again = fs_.unmount();
  ASSERT_TRUE(again) << again.error();
  EXPECT_FALSE(holds_block(pair->first)) << "rewritten on a guess";
  EXPECT_FALSE(holds_block(pair->second)) << "rewritten on a guess";
}

INSTANTIATE_TEST_SUITE_P(, ChecksumEio, testing::Values(Level{"5", 4}),
                         [](const testing::TestParamInfo<Level>& info) {
                           return std::string("raid") + info.param.level;
                         });

}  // namespace
}  // namespace stripefs::test
