// Where each byte of the volume lives on the members: pure arithmetic, no I/O.
//
// Parity levels and RAID0 are organised in stripes: a stripe is one chunk-sized row on every
// member, holding `data_chunks()` data chunks and `parity_chunks()` parity chunks (P, then
// Q). RAID5/6 rotate parity with md's four algorithms (left-symmetric by default), so the
// same member images assemble under md. RAID1 and RAID10 (md's "near 2") have one data
// chunk per stripe with several copies.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "raid/result.hpp"

namespace stripefs {

enum class RaidLevel : uint8_t { raid0 = 0, raid1 = 1, raid5 = 5, raid6 = 6, raid10 = 10 };

// md's ALGORITHM_* numbers, which are also our on-disk values.
enum class ParityLayout : uint8_t {
  left_asymmetric = 0,
  right_asymmetric = 1,
  left_symmetric = 2,
  right_symmetric = 3,
};

Result<RaidLevel> parse_raid_level(std::string_view text);
std::string_view to_string(RaidLevel level);
Result<ParityLayout> parse_parity_layout(std::string_view text);
std::string_view to_string(ParityLayout layout);

// Where one data chunk (or one copy of it) lives.
struct ChunkLocation {
  unsigned member;
  uint64_t member_offset;  // bytes from the start of the member's data area
};

// What a member holds in a given stripe.
struct MemberRole {
  enum Kind : uint8_t { data, p, q, copy } kind;
  unsigned data_index;  // for data (and copy): index of the chunk within the stripe
};

class Geometry {
 public:
  static constexpr unsigned kMaxMembers = 64;

  // member_data_size: usable bytes per member (from its data offset on). The usable size is
  // rounded down to whole chunks.
  static Result<Geometry> create(RaidLevel level, unsigned members, uint32_t chunk_size,
                                 uint64_t member_data_size,
                                 ParityLayout layout = ParityLayout::left_symmetric);

  RaidLevel level() const { return level_; }
  ParityLayout layout() const { return layout_; }
  unsigned members() const { return members_; }
  uint32_t chunk_size() const { return chunk_; }
  unsigned data_chunks() const { return data_chunks_; }      // per stripe
  unsigned parity_chunks() const { return parity_chunks_; }  // per stripe: 0, 1 or 2
  unsigned copies() const { return copies_; }                // 1, or the mirror count
  uint64_t stripe_data_size() const { return uint64_t{data_chunks_} * chunk_; }
  uint64_t stripes() const { return stripes_; }
  uint64_t volume_size() const { return stripes_ * stripe_data_size(); }
  uint64_t member_data_size() const { return rows_ * chunk_; }  // bytes used per member
  // How many members may be missing with all data still readable, whichever they are.
  unsigned redundancy() const;
  bool has_parity() const { return parity_chunks_ > 0; }

  // Data chunk `data_index` of `stripe`, copy `copy` (0 for non-mirrored levels).
  ChunkLocation locate(uint64_t stripe, unsigned data_index, unsigned copy = 0) const;
  // Parity chunk members of a stripe (parity levels only).
  unsigned p_member(uint64_t stripe) const;
  unsigned q_member(uint64_t stripe) const;
  // What `member` holds at `member_offset`'s stripe row; nullopt past the end of the array.
  std::optional<MemberRole> role(unsigned member, uint64_t member_offset) const;
  // Inverse of locate(): the volume offset stored at (member, member_offset), or nullopt
  // for parity.
  std::optional<uint64_t> volume_offset(unsigned member, uint64_t member_offset) const;

  // The member's row (stripe) that holds member_offset.
  uint64_t row_of(uint64_t member_offset) const { return member_offset / chunk_; }

 private:
  Geometry() = default;

  RaidLevel level_{};
  ParityLayout layout_{};
  unsigned members_ = 0;
  uint32_t chunk_ = 0;
  unsigned data_chunks_ = 0;
  unsigned parity_chunks_ = 0;
  unsigned copies_ = 1;
  uint64_t rows_ = 0;  // chunk rows per member
  uint64_t stripes_ = 0;
  // Parity levels, per phase (stripe % members): member of each data index, P, Q, and the
  // role of each member.
  std::vector<std::vector<unsigned>> data_member_;
  std::vector<unsigned> p_member_;
  std::vector<unsigned> q_member_;
  std::vector<std::vector<MemberRole>> roles_;
};

}  // namespace stripefs
