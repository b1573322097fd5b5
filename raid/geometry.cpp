#include "raid/geometry.hpp"

#include <bit>

namespace stripefs {

Result<RaidLevel> parse_raid_level(std::string_view text) {
  if (text.starts_with("raid")) text.remove_prefix(4);
  if (text == "0") return RaidLevel::raid0;
  if (text == "1") return RaidLevel::raid1;
  if (text == "5") return RaidLevel::raid5;
  if (text == "6") return RaidLevel::raid6;
  if (text == "10") return RaidLevel::raid10;
  return fail(EINVAL, "unknown RAID level '{}' (expected 0, 1, 10, 5 or 6)", text);
}

std::string_view to_string(RaidLevel level) {
  switch (level) {
    case RaidLevel::raid0:
      return "raid0";
    case RaidLevel::raid1:
      return "raid1";
    case RaidLevel::raid5:
      return "raid5";
    case RaidLevel::raid6:
      return "raid6";
    case RaidLevel::raid10:
      return "raid10";
  }
  return "unknown";
}

Result<ParityLayout> parse_parity_layout(std::string_view text) {
  if (text == "left-asymmetric") return ParityLayout::left_asymmetric;
  if (text == "right-asymmetric") return ParityLayout::right_asymmetric;
  if (text == "left-symmetric") return ParityLayout::left_symmetric;
  if (text == "right-symmetric") return ParityLayout::right_symmetric;
  return fail(EINVAL, "unknown parity layout '{}'", text);
}

std::string_view to_string(ParityLayout layout) {
  switch (layout) {
    case ParityLayout::left_asymmetric:
      return "left-asymmetric";
    case ParityLayout::right_asymmetric:
      return "right-asymmetric";
    case ParityLayout::left_symmetric:
      return "left-symmetric";
    case ParityLayout::right_symmetric:
      return "right-symmetric";
  }
  return "unknown";
}

Result<Geometry> Geometry::create(RaidLevel level, unsigned members, uint32_t chunk_size,
                                  uint64_t member_data_size, ParityLayout layout) {
  unsigned minimum = 0;
  switch (level) {
    case RaidLevel::raid0:
      minimum = 1;
      break;
    case RaidLevel::raid1:
      minimum = 2;
      break;
    case RaidLevel::raid10:
      minimum = 2;
      break;
    case RaidLevel::raid5:
      minimum = 3;
      break;
    case RaidLevel::raid6:
      minimum = 4;
      break;
  }
  if (members < minimum) {
    return fail(EINVAL, "{} needs at least {} members, got {}", to_string(level), minimum, members);
  }
  if (members > kMaxMembers) {
    return fail(EINVAL, "at most {} members are supported, got {}", kMaxMembers, members);
  }
  if (chunk_size < 4096 || !std::has_single_bit(chunk_size)) {
    return fail(EINVAL, "chunk size {} is not a power of two multiple of 4 KiB", chunk_size);
  }
  if (static_cast<unsigned>(layout) > 3) {
    return fail(EINVAL, "parity layout {} is not one of md's four", static_cast<int>(layout));
  }
  Geometry g;
  g.level_ = level;
  g.layout_ = layout;
  g.members_ = members;
  g.chunk_ = chunk_size;
  g.rows_ = member_data_size / chunk_size;
  if (g.rows_ == 0) {
    return fail(ENOSPC, "members hold {} bytes of data, less than one {}-byte chunk",
                member_data_size, chunk_size);
  }
  switch (level) {
    case RaidLevel::raid0:
      g.data_chunks_ = members;
      g.stripes_ = g.rows_;
      break;
    case RaidLevel::raid1:
      g.data_chunks_ = 1;
      g.copies_ = members;
      g.stripes_ = g.rows_;
      break;
    case RaidLevel::raid10:
      g.data_chunks_ = 1;
      g.copies_ = 2;
      g.stripes_ = g.rows_ * members / 2;
      break;
    case RaidLevel::raid5:
    case RaidLevel::raid6:
      g.parity_chunks_ = level == RaidLevel::raid5 ? 1 : 2;
      g.data_chunks_ = members - g.parity_chunks_;
      g.stripes_ = g.rows_;
      break;
  }
  if (g.has_parity()) {
    const unsigned n = members, k = g.data_chunks_;
    g.data_member_.assign(n, std::vector<unsigned>(k));
    g.p_member_.assign(n, 0);
    g.q_member_.assign(n, 0);
    g.roles_.assign(n, std::vector<MemberRole>(n));
    for (unsigned phase = 0; phase < n; ++phase) {
      // md's raid5_compute_sector(), per algorithm, for data index dd of this phase.
      const bool left =
          layout == ParityLayout::left_asymmetric || layout == ParityLayout::left_symmetric;
      const bool symmetric =
          layout == ParityLayout::left_symmetric || layout == ParityLayout::right_symmetric;
      const unsigned pd = left ? n - 1 - phase : phase;
      unsigned qd = 0;
      for (unsigned dd = 0; dd < k; ++dd) {
        unsigned m;
        if (level == RaidLevel::raid5) {
          m = symmetric ? (pd + 1 + dd) % n : (dd >= pd ? dd + 1 : dd);
        } else if (symmetric) {
          qd = (pd + 1) % n;
          m = (pd + 2 + dd) % n;
        } else if (pd == n - 1) {  // Q D D D P
          qd = 0;
          m = dd + 1;
        } else {  // D D P Q D
          qd = pd + 1;
          m = dd >= pd ? dd + 2 : dd;
        }
        g.data_member_[phase][dd] = m;
        g.roles_[phase][m] = MemberRole{MemberRole::data, dd};
      }
      if (level == RaidLevel::raid6 && !symmetric) qd = pd == n - 1 ? 0 : pd + 1;
      if (level == RaidLevel::raid6 && symmetric) qd = (pd + 1) % n;
      g.p_member_[phase] = pd;
      g.roles_[phase][pd] = MemberRole{MemberRole::p, 0};
      if (level == RaidLevel::raid6) {
        g.q_member_[phase] = qd;
        g.roles_[phase][qd] = MemberRole{MemberRole::q, 0};
      }
    }
  }
  return g;
}

unsigned Geometry::redundancy() const {
  switch (level_) {
    case RaidLevel::raid0:
      return 0;
    case RaidLevel::raid1:
      return members_ - 1;
    case RaidLevel::raid10:
      return 1;
    case RaidLevel::raid5:
      return 1;
    case RaidLevel::raid6:
      return 2;
  }
  return 0;
}

ChunkLocation Geometry::locate(uint64_t stripe, unsigned data_index, unsigned copy) const {
  switch (level_) {
    case RaidLevel::raid0:
      return {data_index, stripe * chunk_};
    case RaidLevel::raid1:
      return {copy, stripe * chunk_};
    case RaidLevel::raid10: {
      const uint64_t position = stripe * 2 + copy;
      return {static_cast<unsigned>(position % members_), (position / members_) * chunk_};
    }
    case RaidLevel::raid5:
    case RaidLevel::raid6:
      return {data_member_[stripe % members_][data_index], stripe * chunk_};
  }
  return {0, 0};
}

unsigned Geometry::p_member(uint64_t stripe) const {
  return p_member_[stripe % members_];
}
unsigned Geometry::q_member(uint64_t stripe) const {
  return q_member_[stripe % members_];
}

std::optional<MemberRole> Geometry::role(unsigned member, uint64_t member_offset) const {
  const uint64_t row = member_offset / chunk_;
  if (row >= rows_ || member >= members_) return std::nullopt;
  switch (level_) {
    case RaidLevel::raid0:
      return MemberRole{MemberRole::data, member};
    case RaidLevel::raid1:
      return MemberRole{MemberRole::copy, 0};
    case RaidLevel::raid10: {
      const uint64_t position = row * members_ + member;
      if (position / 2 >= stripes_) return std::nullopt;  // odd member count: unused tail
      return MemberRole{MemberRole::copy, 0};
    }
    case RaidLevel::raid5:
    case RaidLevel::raid6:
      return roles_[row % members_][member];
  }
  return std::nullopt;
}

std::optional<uint64_t> Geometry::volume_offset(unsigned member, uint64_t member_offset) const {
  auto r = role(member, member_offset);
  if (!r || r->kind == MemberRole::p || r->kind == MemberRole::q) return std::nullopt;
  const uint64_t row = member_offset / chunk_;
  const uint64_t within = member_offset % chunk_;
  uint64_t stripe = row;
  if (level_ == RaidLevel::raid10) stripe = (row * members_ + member) / 2;
  return stripe * stripe_data_size() + uint64_t{r->data_index} * chunk_ + within;
}

}  // namespace stripefs
