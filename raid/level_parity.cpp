// RAID5 and RAID6: each stripe's data chunks plus P (and Q); up to the parity count of
// members may be missing, whichever they are. The I/O is the parity engine's
// (parity_stripe.hpp).
#include "raid/level.hpp"

#include <cstring>

#include "raid/parity.hpp"
#include "raid/parity_stripe.hpp"

namespace stripefs {

namespace {

class ParityLevel final : public Level {
 public:
  explicit ParityLevel(const Geometry& geometry) : Level(geometry) {}

  bool survives(const Active& active) const override {
    unsigned missing = 0;
    for (unsigned m = 0; m < geometry_.members(); ++m) missing += active(m) ? 0 : 1;
    return missing <= geometry_.parity_chunks();
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
  // Full stripes at once, parity computed from the caller's buffers; partial stripes read
  // first (write_partial).
  bool plan_write(StripeIo& io, StripeWrite& s, std::vector<PlannedIo>& ios) const override {
    if (!s.full) return false;
    parity_stripe::plan_full(io, s, ios);
    return true;
  }
  void write_partial(StripeIo& io, StripeWrite& s, IoDone done) const override {
    parity_stripe::write_partial(io, s, std::move(done));
  }
  void read_lost(StripeIo& io, VolumePiece segment, IoDone done) const override {
    parity_stripe::read_lost(io, segment, std::move(done));
  }
  void reconstruct(StripeIo& io, VolumePiece segment, unsigned without,
                   IoDone done) const override {
    parity_stripe::rebuild_segment(io, segment, without, std::move(done));
  }
  std::vector<ChunkLocation> redundancy_set(uint64_t stripe) const override {
    std::vector<ChunkLocation> where;
    const uint64_t row = stripe * geometry_.chunk_size();
    for (unsigned i = 0; i < geometry_.data_chunks(); ++i)
      where.push_back(geometry_.locate(stripe, i));
    where.push_back({geometry_.p_member(stripe), row});
    if (geometry_.parity_chunks() == 2) where.push_back({geometry_.q_member(stripe), row});
    return where;
  }
  // The data is taken as right: parity is recomputed from it.
  std::vector<std::pair<size_t, const std::byte*>> disagreements(std::span<std::byte* const> slots,
                                                                 std::span<std::byte> scratch,
                                                                 size_t chunk) const override {
    const unsigned k = geometry_.data_chunks();
    std::byte* p = scratch.data();
    std::byte* q = geometry_.parity_chunks() == 2 ? scratch.data() + chunk : nullptr;
    parity::generate(slots.subspan(0, k), p, q, chunk);
    std::vector<std::pair<size_t, const std::byte*>> fixes;
    if (std::memcmp(p, slots[k], chunk) != 0) fixes.emplace_back(k, p);
    if (q && std::memcmp(q, slots[k + 1], chunk) != 0) fixes.emplace_back(k + 1, q);
    return fixes;
  }
  parity::Located locate(std::span<std::byte* const> slots, std::span<std::byte> scratch,
                         size_t chunk) const override {
    if (geometry_.parity_chunks() == 2) return parity::locate_raid6(slots, scratch, chunk);
    return Level::locate(slots, scratch, chunk);  // RAID5: P cannot say which chunk
  }
  bool consistent(std::span<std::byte* const> slots, std::span<std::byte>,
                  size_t chunk) const override {
    return parity::consistent(slots, geometry_.parity_chunks(), chunk);
  }
  Result<void> rebuild(std::span<std::byte* const> slots, std::span<const unsigned> missing,
                       size_t chunk) const override {
    return parity::recover(slots, geometry_.parity_chunks(), missing, chunk);
  }
};

}  // namespace

std::unique_ptr<Level> make_parity_level(const Geometry& geometry) {
  return std::make_unique<ParityLevel>(geometry);
}

}  // namespace stripefs
