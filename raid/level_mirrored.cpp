// RAID1 and RAID10 (md's near-2): every chunk has copies on distinct members; data is lost
// only when every copy of some chunk is gone.
#include "raid/level.hpp"

#include <algorithm>
#include <cstring>

namespace stripefs {

namespace {

class MirroredLevel final : public Level {
 public:
  explicit MirroredLevel(const Geometry& geometry) : Level(geometry) {}

  bool survives(const Active& active) const override {
    const unsigned n = geometry_.members();
    if (geometry_.level() == RaidLevel::raid1) {
      for (unsigned m = 0; m < n; ++m) {
        if (active(m)) return true;
      }
      return false;
    }
    // near-2: chunk c sits on members 2c and 2c+1 (mod n); every pairing occurs in n chunks.
    for (unsigned c = 0; c < n; ++c) {
      if (!active((2 * c) % n) && !active((2 * c + 1) % n)) return false;
    }
    return true;
  }
  void write_targets(uint64_t stripe, unsigned index, const Active& active,
                     std::vector<ChunkLocation>& out) const override {
    for (unsigned copy = 0; copy < geometry_.copies(); ++copy) {
      const ChunkLocation at = geometry_.locate(stripe, index, copy);
      if (active(at.member)) out.push_back(at);
    }
  }
  std::optional<ChunkLocation> read_from(uint64_t stripe, unsigned index, const Active& active,
                                         uint64_t spread) const override {
    const unsigned copies = geometry_.copies();
    const unsigned first = static_cast<unsigned>(spread % copies);
    for (unsigned c = 0; c < copies; ++c) {
      const ChunkLocation at = geometry_.locate(stripe, index, (first + c) % copies);
      if (active(at.member)) return at;
    }
    return std::nullopt;
  }
  bool plan_write(StripeIo& io, StripeWrite& s, std::vector<PlannedIo>& ios) const override {
    plan_as_is(io, s, ios);
    return true;
  }
  std::vector<ChunkLocation> redundancy_set(uint64_t stripe) const override {
    std::vector<ChunkLocation> where;
    for (unsigned c = 0; c < geometry_.copies(); ++c)
      where.push_back(geometry_.locate(stripe, 0, c));
    return where;
  }
  // The first copy is taken as right: a mirror cannot tell which copy is.
  std::vector<std::pair<size_t, const std::byte*>> disagreements(std::span<std::byte* const> slots,
                                                                 std::span<std::byte>,
                                                                 size_t chunk) const override {
    std::vector<std::pair<size_t, const std::byte*>> fixes;
    for (size_t c = 1; c < slots.size(); ++c) {
      if (std::memcmp(slots[0], slots[c], chunk) != 0) fixes.emplace_back(c, slots[0]);
    }
    return fixes;
  }
  // The copy every other copy disagrees with, while those agree among themselves.
  parity::Located locate(std::span<std::byte* const> slots, std::span<std::byte>,
                         size_t chunk) const override {
    const size_t n = slots.size();
    const auto same = [&](size_t a, size_t b) {
      return std::memcmp(slots[a], slots[b], chunk) == 0;
    };
    size_t agreeing = 0;  // copies equal to copy 0
    for (size_t c = 1; c < n; ++c) agreeing += same(0, c) ? 1 : 0;
    if (agreeing == n - 1) return {};
    if (n < 3) return {parity::Located::Kind::unknown, 0};
    // Copy 0 against all the others, or one other against copy 0 and the rest.
    if (agreeing == 0) {
      for (size_t c = 2; c < n; ++c) {
        if (!same(1, c)) return {parity::Located::Kind::unknown, 0};
      }
      return {parity::Located::Kind::one, 0};
    }
    if (agreeing == n - 2) {
      for (size_t c = 1; c < n; ++c) {
        if (!same(0, c)) return {parity::Located::Kind::one, static_cast<unsigned>(c)};
      }
    }
    return {parity::Located::Kind::unknown, 0};
  }
  Result<void> rebuild(std::span<std::byte* const> slots, std::span<const unsigned> missing,
                       size_t chunk) const override {
    for (size_t c = 0; c < slots.size(); ++c) {
      if (std::find(missing.begin(), missing.end(), c) != missing.end()) continue;
      for (unsigned m : missing) std::memcpy(slots[m], slots[c], chunk);
      return {};
    }
    return fail(EIO, "every copy is missing");
  }
};

}  // namespace

std::unique_ptr<Level> make_mirrored_level(const Geometry& geometry) {
  return std::make_unique<MirroredLevel>(geometry);
}

}  // namespace stripefs
