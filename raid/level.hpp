// What differs between RAID levels, as one small table of operations with an implementation
// per family (SPDK's raid module descriptors, in spirit): striped (RAID0), mirrored (RAID1,
// RAID10) and parity (RAID5, RAID6). The Volume does the common work (checking and
// splitting requests, stripe locks, the write-intent bitmap, batching, completions); a level
// answers where data lives and what survives, and does the I/O that is its own: how a
// stripe is written, how a chunk with no member left is read, how a stripe is checked and
// rebuilt.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "raid/geometry.hpp"
#include "raid/io_batch.hpp"
#include "raid/parity.hpp"
#include "raid/result.hpp"
#include "raid/stripe_io.hpp"

namespace stripefs {

class Level {
 public:
  using Active = std::function<bool(unsigned member)>;

  // The implementation for `geometry`'s level; it keeps a copy of the geometry.
  static std::unique_ptr<Level> create(const Geometry& geometry);
  // The fewest members an array of `level` is made of (as mdadm's rule: RAID0, RAID1 and
  // RAID10 2, RAID5 3, RAID6 4). Creating an array asks this, and so does mkfs.
  static unsigned min_members(RaidLevel level);
  virtual ~Level() = default;

  // ---- placement ----
  // Whether every byte is still readable and writable with the members `active` says are.
  virtual bool survives(const Active& active) const = 0;
  // Where new data of chunk `index` of `stripe` goes: every active copy (parity levels: its
  // data member, if active).
  virtual void write_targets(uint64_t stripe, unsigned index, const Active& active,
                             std::vector<ChunkLocation>& out) const = 0;
  // An active member holding chunk `index` of `stripe` whole, or nullopt (parity levels then
  // rebuild it; the others have lost it). `spread` varies the choice among copies.
  virtual std::optional<ChunkLocation> read_from(uint64_t stripe, unsigned index,
                                                 const Active& active, uint64_t spread) const = 0;

  // ---- I/O ----
  // The member writes of stripe `s` when they can go out at once (any level's full stripe,
  // and every stripe of a level without parity): appended to `ios`, true. False when the
  // stripe needs reads first; write_partial() does it then.
  virtual bool plan_write(StripeIo& io, StripeWrite& s, std::vector<PlannedIo>& ios) const = 0;
  // Writes stripe `s`, which plan_write() declined, and calls `done` once. `s` stays live
  // and its stripe locked until then.
  virtual void write_partial(StripeIo& io, StripeWrite& s, IoDone done) const;
  // Reads `segment` (within one chunk), none of whose copies is in service: parity levels
  // rebuild it from the rest of its stripe; the others have lost it (EIO).
  virtual void read_lost(StripeIo& io, VolumePiece segment, IoDone done) const;
  // Reads `segment` (within one chunk) into its buffer without member `without`, whose copy
  // failed a read: from another copy, or rebuilt from parity. The caller holds the stripe's
  // lock. EIO when none is left (a level without redundancy: at once). Parity levels fail
  // members that fail their reads meanwhile and try again with the rest; mirrors try the
  // next copy and leave one that failed in service (md's fix_read_error: a bad spot, whose
  // own read will heal it, is not a dead device; the caller fails `without` if no copy is
  // good).
  virtual void reconstruct(StripeIo& io, VolumePiece segment, unsigned without, IoDone done) const;

  // ---- checking and rebuilding a stripe ----
  // The chunks of `stripe` that redundancy ties together (the copies; or data, P, Q), in
  // slot order. Empty when the level keeps no redundancy.
  virtual std::vector<ChunkLocation> redundancy_set(uint64_t stripe) const = 0;
  // Given those chunks' contents (`chunk` bytes each), the slots that disagree and what they
  // should hold. `scratch` holds two chunks for computed contents.
  virtual std::vector<std::pair<size_t, const std::byte*>> disagreements(
      std::span<std::byte* const> slots, std::span<std::byte> scratch, size_t chunk) const = 0;
  // Scrub: which slot of the set (as read) is wrong, when the level can tell without
  // checksums. RAID6's syndromes name a single bad chunk; a mirror copy that every other
  // copy disagrees with (three copies or more) is the bad one. RAID5's parity and two
  // differing copies say only that something is wrong (unknown). Two bad chunks can pass for
  // one (a RAID6 data chunk and P off by the same bytes look like a bad Q): only checksums of
  // the data rule that out. `scratch`: two chunks.
  virtual parity::Located locate(std::span<std::byte* const> slots, std::span<std::byte> scratch,
                                 size_t chunk) const;
  // Whether the set agrees with itself (locate() would say consistent), at the least cost:
  // parity checked in one pass without writing it, copies compared.
  virtual bool consistent(std::span<std::byte* const> slots, std::span<std::byte> scratch,
                          size_t chunk) const {
    return locate(slots, scratch, chunk).kind == parity::Located::Kind::consistent;
  }
  // Rebuilds the slots listed in `missing` (of the same set, `chunk` bytes each) in place
  // from the others. Fails when more are missing than the level can rebuild.
  virtual Result<void> rebuild(std::span<std::byte* const> slots, std::span<const unsigned> missing,
                               size_t chunk) const = 0;

  // Every segment of `s` to every active copy of its chunk (write_targets), as they are.
  void plan_direct(StripeIo& io, const StripeWrite& s, std::vector<PlannedIo>& ios) const;

 protected:
  explicit Level(const Geometry& geometry) : geometry_(geometry) {}
  // plan_direct, counted as a full or partial stripe write: levels without parity.
  void plan_as_is(StripeIo& io, const StripeWrite& s, std::vector<PlannedIo>& ios) const;
  const Geometry geometry_;

 private:
  // reconstruct() from the copies, none of the members in `tried` (a bit per member).
  void read_other_copy(StripeIo& io, VolumePiece segment, uint64_t tried, IoDone done) const;
};

// The three families, for Level::create.
std::unique_ptr<Level> make_striped_level(const Geometry& geometry);
std::unique_ptr<Level> make_mirrored_level(const Geometry& geometry);
std::unique_ptr<Level> make_parity_level(const Geometry& geometry);

}  // namespace stripefs
