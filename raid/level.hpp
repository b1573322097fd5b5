// What differs between RAID levels, as one small table of operations with an implementation
// per family (SPDK's raid module descriptors, in spirit): striped (RAID0), mirrored (RAID1,
// RAID10) and parity (RAID5, RAID6). The Volume does the common work (splitting requests,
// stripe locks, batching, completions, the parity engine) and asks its level these questions.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "raid/geometry.hpp"
#include "raid/result.hpp"

namespace stripefs {

class Level {
 public:
  using Active = std::function<bool(unsigned member)>;

  // The implementation for `geometry`'s level; it keeps a copy of the geometry.
  static std::unique_ptr<Level> create(const Geometry& geometry);
  virtual ~Level() = default;

  // Whether every byte is still readable and writable with the members `active` says are.
  virtual bool survives(const Active& active) const = 0;
  // Where new data of chunk `index` of `stripe` goes: every active copy (parity levels: its
  // data member, if active; parity is the Volume's parity engine's business).
  virtual void write_targets(uint64_t stripe, unsigned index, const Active& active,
                             std::vector<ChunkLocation>& out) const = 0;
  // An active member holding chunk `index` of `stripe` whole, or nullopt (parity levels then
  // rebuild it; the others have lost it). `spread` varies the choice among copies.
  virtual std::optional<ChunkLocation> read_from(uint64_t stripe, unsigned index,
                                                 const Active& active, uint64_t spread) const = 0;
  // The chunks of `stripe` that redundancy ties together (the copies; or data, P, Q), in
  // slot order. Empty when the level keeps no redundancy.
  virtual std::vector<ChunkLocation> redundancy_set(uint64_t stripe) const = 0;
  // Given those chunks' contents (`chunk` bytes each), the slots that disagree and what they
  // should hold. `scratch` holds two chunks for computed contents.
  virtual std::vector<std::pair<size_t, const std::byte*>> disagreements(
      std::span<std::byte* const> slots, std::span<std::byte> scratch, size_t chunk) const = 0;
  // Rebuilds the slots listed in `missing` (of the same set, `chunk` bytes each) in place
  // from the others. Fails when more are missing than the level can rebuild.
  virtual Result<void> rebuild(std::span<std::byte* const> slots, std::span<const unsigned> missing,
                               size_t chunk) const = 0;

 protected:
  explicit Level(const Geometry& geometry) : geometry_(geometry) {}
  const Geometry geometry_;
};

// The three families, for Level::create.
std::unique_ptr<Level> make_striped_level(const Geometry& geometry);
std::unique_ptr<Level> make_mirrored_level(const Geometry& geometry);
std::unique_ptr<Level> make_parity_level(const Geometry& geometry);

}  // namespace stripefs
