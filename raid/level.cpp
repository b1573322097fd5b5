#include "raid/level.hpp"

namespace stripefs {

std::unique_ptr<Level> Level::create(const Geometry& geometry) {
  switch (geometry.level()) {
    case RaidLevel::raid0:
      return make_striped_level(geometry);
    case RaidLevel::raid1:
    case RaidLevel::raid10:
      return make_mirrored_level(geometry);
    case RaidLevel::raid5:
    case RaidLevel::raid6:
      return make_parity_level(geometry);
  }
  return nullptr;
}

unsigned Level::min_members(RaidLevel level) {
  switch (level) {
    case RaidLevel::raid0:
    case RaidLevel::raid1:
    case RaidLevel::raid10:
      return 2;
    case RaidLevel::raid5:
      return 3;
    case RaidLevel::raid6:
      return 4;
  }
  return 2;
}

void Level::write_partial(StripeIo&, StripeWrite& s, IoDone done) const {
  done(fail(EINVAL, "stripe {}: this level writes every stripe at once", s.stripe));
}

void Level::read_lost(StripeIo&, VolumePiece segment, IoDone done) const {
  done(fail(EIO, "volume byte {}: no surviving copy", segment.offset));
}

void Level::reconstruct(StripeIo& io, VolumePiece segment, unsigned without, IoDone done) const {
  read_other_copy(io, segment, uint64_t{1} << without, std::move(done));
}

void Level::read_other_copy(StripeIo& io, VolumePiece segment, uint64_t tried, IoDone done) const {
  const uint64_t stripe_size = geometry_.stripe_data_size();
  const uint64_t chunk = geometry_.chunk_size();
  const uint64_t stripe = segment.offset / stripe_size;
  const auto index = static_cast<unsigned>(segment.offset % stripe_size / chunk);
  const std::optional<ChunkLocation> from = read_from(
      stripe, index, [&](unsigned m) { return (tried >> m & 1) == 0 && io.members.active(m); }, 0);
  if (!from) {
    done(fail(EIO, "volume byte {}: no other copy reads", segment.offset));
    return;
  }
  VolumeCounters::add(io.stats.member_read_ios, 1);
  const unsigned member = from->member;
  submit_ios(io.members.all(), MemberOp::read,
             {{member, io.data_offset + from->member_offset + segment.offset % chunk,
               segment.data.data(), segment.data.size(), 0}},
             false,
             [this, &io, segment, tried, member, done = std::move(done)](auto failures) mutable {
               if (failures.empty()) return done({});
               // A bad spot on this copy too: the next one (it stays in service).
               read_other_copy(io, segment, tried | uint64_t{1} << member, std::move(done));
             });
}

void Level::plan_direct(StripeIo& io, const StripeWrite& s, std::vector<PlannedIo>& ios) const {
  const Active live = io.members.in_sync_fn(s.stripe);
  std::vector<ChunkLocation> targets;
  for (unsigned index = 0; index < geometry_.data_chunks(); ++index) {
    if (s.data[index].empty()) continue;
    targets.clear();
    write_targets(s.stripe, index, live, targets);
    for (const Segment& seg : s.data[index]) {
      for (const ChunkLocation& at : targets) {
        ios.push_back({at.member, io.data_offset + at.member_offset + seg.chunk_offset, seg.data,
                       seg.length, 0});
      }
    }
  }
}

void Level::plan_as_is(StripeIo& io, const StripeWrite& s, std::vector<PlannedIo>& ios) const {
  plan_direct(io, s, ios);
  VolumeCounters::add(s.full ? io.stats.full_stripe_writes : io.stats.partial_stripe_writes, 1);
  VolumeCounters::add(s.full ? io.stats.full_stripe_bytes : io.stats.partial_stripe_bytes, s.bytes);
}

parity::Located Level::locate(std::span<std::byte* const> slots, std::span<std::byte> scratch,
                              size_t chunk) const {
  if (disagreements(slots, scratch, chunk).empty()) return {};
  return {parity::Located::Kind::unknown, 0};
}

}  // namespace stripefs
