// What the layer above knows of the data, for a scrub: whether a block holds what it should
// (its checksum). Redundancy alone says only that a RAID5 stripe or a pair of copies
// disagrees; a checksum says which side is wrong, and rules out the cases where two bad
// chunks pass for one. The Volume asks while it holds a stripe's lock, so the answers must
// be ready before (a batch) and cost no I/O and no lock: the filesystem fetches a batch's
// checksums first and keeps the blocks from being reused until the batch is gone.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "raid/result.hpp"

namespace stripefs {

// The checks for one range of the volume, held for as long as a scrub works on it.
class ScrubBatch {
 public:
  enum class Verdict : uint8_t {
    unknown,  // nothing to check against (not file data, not yet or no longer described)
    good,
    bad,
  };
  virtual ~ScrubBatch() = default;
  // The bytes checks are made on: offsets and spans given to check() are whole blocks.
  virtual uint32_t block_size() const = 0;
  // Whether `block` (block_size() bytes) is what volume byte `offset` should hold. Called
  // under stripe locks: no I/O, no locks; and from several scrub workers at once, so it
  // must only read what the batch holds.
  virtual Verdict check(uint64_t offset, std::span<const std::byte> block) const = 0;
};

// Makes the batches for a scrub of the whole volume.
class ScrubChecker {
 public:
  virtual ~ScrubChecker() = default;
  // A scrub starts: whatever the checker needs to learn first (blocking; not under any
  // Volume lock). It returns early, successfully, once `stop` is set.
  virtual Result<void> begin(const std::atomic<bool>& stop) = 0;
  // The checks for volume bytes [begin, end), before the scrub locks its stripes.
  virtual Result<std::unique_ptr<ScrubBatch>> batch(uint64_t begin, uint64_t end) = 0;
  // The scrub ended (finished, stopped or failed).
  virtual void end() = 0;
};

}  // namespace stripefs
