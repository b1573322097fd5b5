// RAID0: every chunk lives once; any missing member loses data.
#include "raid/level.hpp"

namespace stripefs {

namespace {

class StripedLevel final : public Level {
 public:
  explicit StripedLevel(const Geometry& geometry) : Level(geometry) {}

  bool survives(const Active& active) const override {
    for (unsigned m = 0; m < geometry_.members(); ++m) {
      if (!active(m)) return false;
    }
    return true;
  }
  void write_targets(uint64_t stripe, unsigned index, const Active& active,
                     std::vector<ChunkLocation>& out) const override {
    const ChunkLocation at = geometry_.locate(stripe, index);
    if (active(at.member)) out.push_back(at);
  }
  std::optional<ChunkLocation> read_from(uint64_t stripe, unsigned index, const Active& active,
                                         uint64_t) const override {
    const ChunkLocation at = geometry_.locate(stripe, index);
    if (!active(at.member)) return std::nullopt;
    return at;
  }
  bool plan_write(StripeIo& io, StripeWrite& s, std::vector<PlannedIo>& ios) const override {
    plan_as_is(io, s, ios);
    return true;
  }
  std::vector<ChunkLocation> redundancy_set(uint64_t) const override { return {}; }
  std::vector<std::pair<size_t, const std::byte*>> disagreements(std::span<std::byte* const>,
                                                                 std::span<std::byte>,
                                                                 size_t) const override {
    return {};
  }
  Result<void> rebuild(std::span<std::byte* const>, std::span<const unsigned>,
                       size_t) const override {
    return fail(EINVAL, "raid0 keeps no redundancy to rebuild from");
  }
};

}  // namespace

std::unique_ptr<Level> make_striped_level(const Geometry& geometry) {
  return std::make_unique<StripedLevel>(geometry);
}

}  // namespace stripefs
