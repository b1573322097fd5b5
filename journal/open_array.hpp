// One way to open an array with everything it keeps: its write-intent bitmap and its
// stripe journal (the write hole closed) plugged in, and its parity buffers registered with
// the members' io_uring engine, so full-stripe parity goes out as fixed-buffer writes. The
// daemon, mkfs, the tests and the demo open arrays through it (the bitmap benchmark builds
// its own OpenOptions, to run with and without the bitmap).
#pragma once

#include <chrono>
#include <memory>
#include <span>

#include "journal/stripe_journal.hpp"
#include "raid/array.hpp"
#include "raid/io_engine.hpp"

namespace stripefs {

struct ArraySetup {
  // Start a dirty degraded array, bring back stale members, rebuild a damaged bitmap or
  // journal (OpenOptions::force).
  bool force = false;
  // false: partial stripes go in place without the stripe journal (the write hole open
  // until a clean close; OpenOptions::log_partial_stripes).
  bool log_partial_stripes = true;
  // The array's separate journal device, when it keeps its journal on one; null when it
  // keeps it on its members (or has none). Must outlive the array.
  Member* journal_device = nullptr;
  // Bits of idle regions are cleared after this long (0: only when asked).
  std::chrono::milliseconds bitmap_clear_delay{5000};
  // The stripe journal is checkpointed at least this often (crash tests that keep records
  // in the log make it long).
  std::chrono::milliseconds journal_idle_checkpoint = kIdleCheckpoint;
  // The engine the members run on: the parity buffers are registered with it. Null: none
  // (memory members, or members driven inline).
  IoEngine* engine = nullptr;
  // The rebuild's speed limits from the start (OpenOptions::speed_min, speed_max).
  uint64_t speed_min = 16u << 20;
  uint64_t speed_max = 0;
};

// The OpenOptions that plug in the bitmap and the stripe journal: for callers of
// Array::open that set other options too (tests of the open itself).
OpenOptions open_options(const ArraySetup& setup);

// An open array and the registration of its parity buffers, which goes first (the kernel
// must not keep pages of freed memory pinned).
class OpenedArray {
 public:
  OpenedArray() = default;
  OpenedArray(std::unique_ptr<Array> array, FixedBuffer parity)
      : array_(std::move(array)), parity_(std::move(parity)) {}
  OpenedArray(OpenedArray&&) = default;
  // The array held before goes the way reset() takes it: its registration first.
  OpenedArray& operator=(OpenedArray&& other) noexcept {
    reset();
    array_ = std::move(other.array_);
    parity_ = std::move(other.parity_);
    return *this;
  }

  Array& operator*() const { return *array_; }
  Array* operator->() const { return array_.get(); }
  Array* get() const { return array_.get(); }
  // Closes the array (flush, clean shutdown recorded), then lets the registration go.
  Result<void> close();
  void reset();

 private:
  std::unique_ptr<Array> array_;
  FixedBuffer parity_;  // declared after array_: unregistered before the arena is freed
};

// Array::open with open_options(setup), then the Volume's parity arena registered with
// `setup.engine` when there is one (a registration that fails is logged: the writes then
// go out as ordinary ones).
Result<OpenedArray> open_array(std::span<Member* const> members, const ArraySetup& setup);

}  // namespace stripefs
