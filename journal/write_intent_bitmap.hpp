// md's internal write-intent bitmap: one bit per region of member data, kept on every
// member. A bit is set (durably, on every active member) before the first write into its
// region, and cleared lazily once the region has been idle for a while and the members have
// been flushed. After a crash only the regions whose bits are set need a resync.
//
// Bitmap I/O goes out in serialized batches, each written from a snapshot of the in-memory
// image: a write in flight never sees later changes, and a clear can never overtake a later
// set. Writes are sized to the members' optimal I/O size and aligned to it, clipped to the
// bitmap area (never the superblock, never data); the first unit may include the header,
// rewritten from the in-memory image. Each batch goes with FUA to every active member, and
// a member whose bitmap write fails is failed (Volume::fail_member).
//
// begin_write calls `ready` at once when every region's bit is set already (a hot region:
// no bitmap I/O, counted in ready_at_once); otherwise once the batch holding the bits, or a
// later one, has completed. begin_write and end_write never block on I/O; format, load,
// clear_idle, settle, member_returned and the destructor do, so never call them from a
// completion, a `ready` continuation or a failure listener.
//
// Known gaps: the stale flag (set by a forced rebuild) is cleared once the full resync that
// follows has finished; set by a forced rebuild on a clean array while a member was away, it
// is never cleared, and every later re-add rebuilds the whole member. The header's events
// and daemon_sleep_ms are written at format and not kept up (see bitmap_format.hpp).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "journal/bitmap_format.hpp"
#include "raid/aligned_buffer.hpp"
#include "raid/volume.hpp"
#include "raid/write_intent.hpp"

namespace stripefs {

struct BitmapStats {
  uint64_t batches = 0;  // bitmap write batches issued
  uint64_t bits_set = 0;
  uint64_t bits_cleared = 0;
  uint64_t ready_at_once = 0;  // begin_write calls that needed no bitmap I/O (region hot)
};

class WriteIntentBitmap final : public WriteIntent {
 public:
  // Writes an all-clear bitmap (header + bits) at `area_offset` of every member.
  static Result<void> format(std::span<Member* const> members, uint64_t area_offset,
                             uint64_t area_size, const BitmapHeader& header);

  // Loads the bitmap of an assembled array from its active members (set bits are ORed: a
  // bit that reached any member counts). After an unclean shutdown (`clean` false) set bits
  // mark ranges to resync and stay set until resynced(); after a clean one they are merely
  // not cleared yet. The members must agree on region_size and regions. With `clear_delay`
  // > 0 a thread runs clear_idle(clear_delay) every clear_delay / 2; 0 disables it
  // (clear_idle() then runs only when called).
  static Result<std::unique_ptr<WriteIntentBitmap>> load(Volume& volume, uint64_t area_offset,
                                                         uint64_t area_size, const Uuid& array_uuid,
                                                         bool clean,
                                                         std::chrono::milliseconds clear_delay);
  ~WriteIntentBitmap() override;

  void begin_write(uint64_t begin, uint64_t end, std::function<void()> ready) override;
  void end_write(uint64_t begin, uint64_t end) override;
  std::vector<std::pair<uint64_t, uint64_t>> ranges_to_resync() const override;
  void resynced(uint64_t begin, uint64_t end) override;
  std::vector<std::pair<uint64_t, uint64_t>> ranges_missed_since(uint64_t events) const override;
  void set_events(uint64_t events) override { events_.store(events); }
  Result<void> member_returned(Member& member) override;

  // Clears the bits of regions idle for at least `idle` (flushing the members first; if the
  // flush fails, nothing is cleared) and waits until that is on disk. A region written again
  // meanwhile keeps its bit. Returns how many bits were cleared. Clears nothing while a
  // member is missing: the bits then record what it missed. Blocking.
  Result<uint64_t> clear_idle(std::chrono::milliseconds idle);
  // Waits until every bitmap write issued so far is on disk. Blocking.
  void settle();

  BitmapHeader header() const;
  uint64_t write_unit() const { return unit_; }
  uint64_t dirty_regions() const;
  BitmapStats stats() const;

 private:
  enum class RegionState : uint8_t { clean, setting, dirty, needs_resync };
  struct Region {
    uint32_t writers = 0;
    RegionState state = RegionState::clean;
    std::chrono::steady_clock::time_point idle_since{};
  };
  struct Batch;

  WriteIntentBitmap(Volume& volume, uint64_t area_offset, uint64_t area_size, BitmapHeader header,
                    AlignedBuffer image, uint64_t unit, bool clean);
  void set_bit(uint64_t region, bool value);
  uint64_t unit_of(uint64_t region) const;
  // With mutex_ held: the member data ranges of the regions `wanted` picks, merged.
  std::vector<std::pair<uint64_t, uint64_t>> ranges_locked(
      const std::function<bool(const Region&)>& wanted) const;
  // With mutex_ held: turns the pending units and waiters into a batch if none is in flight.
  std::unique_ptr<Batch> take_batch_locked();
  void submit_batch(std::unique_ptr<Batch> batch);
  void batch_done(std::unique_ptr<Batch> batch);
  void cleaner_loop(std::chrono::milliseconds delay);

  Volume& volume_;
  const uint64_t area_offset_;
  const uint64_t area_size_;
  BitmapHeader header_;  // geometry fixed; flags (stale) and events_cleared change under mutex_
  std::atomic<uint64_t> events_{0};  // the array's, as last told (set_events)
  const uint64_t unit_;              // bytes per bitmap write: the members' preferred I/O size

  mutable std::mutex mutex_;  // guards everything below
  AlignedBuffer image_;       // header block + bits, as they should be on disk
  std::vector<Region> regions_;
  std::set<uint64_t> pending_units_;  // area offsets of units changed since the last batch
  bool header_pending_ = false;       // the header block changed: written whole next batch
  std::vector<uint64_t> pending_regions_;
  std::vector<std::function<void()>> pending_waiters_;
  bool in_flight_ = false;
  std::condition_variable settled_;
  BitmapStats stats_;

  std::mutex cleaner_mutex_;
  std::condition_variable cleaner_cv_;
  bool stopping_ = false;
  std::thread cleaner_;
};

}  // namespace stripefs
