// The array as a virtual block device: asynchronous read/write/flush over the members.
//
// Writes: the Volume never copies the caller's data. A full stripe's parity is computed
// from the caller's buffers and those same buffers are submitted to the members; a partial
// stripe is read-modify-written or reconstruct-written, whichever reads less, under the
// stripe's lock. Buffers must stay live and unchanged until the callback runs (stable
// pages). Reads land directly in the caller's buffers, also when a missing member's chunk
// is rebuilt from parity.
#pragma once

#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "raid/buffer_pool.hpp"
#include "raid/geometry.hpp"
#include "raid/level.hpp"
#include "raid/member.hpp"
#include "raid/result.hpp"
#include "raid/stripe_locks.hpp"
#include "raid/stripe_log.hpp"
#include "raid/write_intent.hpp"

namespace stripefs {

// One contiguous run of the volume and the caller's buffer for it. Offsets, lengths and
// buffer addresses must be multiples of the array's sector size (512 or the members'
// largest logical block).
struct VolumePiece {
  uint64_t offset;
  std::span<std::byte> data;
};

struct VolumeStats {
  uint64_t full_stripe_writes = 0;
  uint64_t full_stripe_bytes = 0;  // caller bytes that took the full-stripe path
  uint64_t partial_stripe_writes = 0;
  uint64_t partial_stripe_bytes = 0;
  uint64_t rmw_writes = 0;       // partial stripes done by read-modify-write
  uint64_t rcw_writes = 0;       // ... by reconstruct-write
  uint64_t degraded_writes = 0;  // partial stripes written with a member missing
  uint64_t prereads = 0;         // member reads issued for partial-stripe writes
  uint64_t preread_bytes = 0;
  uint64_t degraded_reads = 0;    // read segments rebuilt from parity
  uint64_t member_write_ios = 0;  // planned member I/Os, before merging
  uint64_t member_read_ios = 0;
  uint64_t direct_reads = 0;  // reads within one chunk sent straight to their member
};

class Volume {
 public:
  using Callback = std::function<void(Result<void>)>;
  using FailureListener = std::function<void(unsigned member, const Error& why)>;

  // `members[i]` plays role i; nullptr for a member that is missing. Data lives from
  // `data_offset` on each member. Members must outlive the Volume.
  static Result<std::unique_ptr<Volume>> create(Geometry geometry, std::vector<Member*> members,
                                                uint64_t data_offset);

  const Geometry& geometry() const { return geometry_; }
  uint64_t size() const { return geometry_.volume_size(); }
  uint32_t sector_size() const { return sector_; }
  uint64_t data_offset() const { return data_offset_; }

  void read(std::vector<VolumePiece> pieces, Callback done);
  void write(std::vector<VolumePiece> pieces, Callback done);
  // Durable: every write acknowledged before this call reached stable media on every
  // active member.
  void flush(Callback done);

  // Blocking forms, for tools and tests; never call them from a completion.
  Result<void> read(uint64_t offset, std::span<std::byte> data);
  Result<void> write(uint64_t offset, std::span<const std::byte> data);
  Result<void> flush();

  // --- members ---
  bool active(unsigned member) const { return active_[member].load(std::memory_order_acquire); }
  unsigned missing_members() const;
  // True when some data can no longer be read or written (beyond the level's redundancy).
  bool failed() const;
  // Takes a member out of service (an I/O error, or an operator's request). The listener
  // hears of it once per member, on the thread that noticed, and must then record it durably
  // and call failure_recorded(): until then, writes and flushes are not acknowledged (as md
  // holds writes until its superblock update), so a crash can never bring back the failed
  // member as if it were current.
  void fail_member(unsigned member, const Error& why);
  void set_failure_listener(FailureListener listener);
  void failure_recorded(unsigned member);
  Member* member(unsigned index) const { return members_[index]; }
  // Re-adding a member that was away (md's re-add with a bitmap), before any I/O: hold_out
  // keeps it out of service silently; rebuild_member rewrites its chunks of stripes
  // [first, first+count) from the other members, under each stripe's lock (blocking);
  // restore_member puts it back once everything it missed is rebuilt.
  void hold_out(unsigned member);
  // `target_failed`, if given, is set when the member itself refused a write.
  Result<void> rebuild_member(unsigned member, uint64_t first, uint64_t count,
                              bool* target_failed = nullptr);
  void restore_member(unsigned member);

  // Every write is announced to `intent` (the write-intent bitmap) before any of its data
  // reaches a member. Set before the first write; `intent` must outlive the Volume's I/O.
  void set_write_intent(WriteIntent* intent) { intent_ = intent; }
  // Every partial-stripe write of a parity level is made durable in `log` before it is
  // written in place (full stripes bypass it). Set before the first write.
  void set_stripe_log(StripeLog* log) { stripe_log_ = log; }
  // The member data-area range [begin, end) that stripes [first, last] occupy.
  std::pair<uint64_t, uint64_t> member_range(uint64_t first_stripe, uint64_t last_stripe) const;
  // The stripes [first, last] with a chunk in member data-area range [begin, end).
  std::pair<uint64_t, uint64_t> stripes_of(uint64_t begin, uint64_t end) const;

  // Reads stripes [first, first+count) from every member and counts those whose parity does
  // not match their data, or whose mirror copies differ. With `repair`, also rewrites the
  // parity from the data (mirrors: the other copies from the first), under each stripe's
  // lock so it may run beside writes: that is resync. Needs every member. Blocking.
  Result<uint64_t> check_stripes(uint64_t first, uint64_t count, bool repair);
  Result<uint64_t> count_inconsistent_stripes(uint64_t first, uint64_t count) {
    return check_stripes(first, count, false);
  }

  VolumeStats stats() const;
  // Where the full-stripe parity buffers live: register it with the members' IoEngine
  // (IoEngine::register_buffer) so parity writes go out as fixed-buffer writes.
  std::span<std::byte> parity_arena() const { return parity_pool_.arena(); }

 private:
  struct WriteJob;
  struct StripeWrite;
  struct ReadJob;

  Volume(Geometry geometry, std::vector<Member*> members, uint64_t data_offset, uint32_t sector);
  static size_t parity_arena_buffers(const Geometry& geometry);

  Result<bool> check_stripe(uint64_t stripe, bool repair, std::span<std::byte> rows,
                            std::span<std::byte> expected);
  Level::Active is_active() const {
    return [this](unsigned member) { return active(member); };
  }
  Result<void> check_pieces(const std::vector<VolumePiece>& pieces) const;
  void note_failures(const std::vector<struct FailedIo>& failures);

  // Write path.
  void lock_next(std::shared_ptr<WriteJob> job);
  void start_write(std::shared_ptr<WriteJob> job);
  void issue_write(std::shared_ptr<WriteJob> job);
  void plan_direct_stripe(StripeWrite& stripe, std::vector<struct PlannedIo>& ios);
  void plan_full_stripe(StripeWrite& stripe, std::vector<struct PlannedIo>& ios);
  void run_partial_stripe(std::shared_ptr<WriteJob> job, size_t index);
  void finish_partial_stripe(std::shared_ptr<WriteJob> job, size_t index, bool rmw);
  void stripe_done(std::shared_ptr<WriteJob> job, Result<void> result);

  // Read path.
  bool read_one(const VolumePiece& segment, Callback& done);
  void read_segments(std::shared_ptr<ReadJob> job, std::vector<VolumePiece> segments);
  void read_degraded(std::shared_ptr<ReadJob> job, VolumePiece segment);
  void read_part_done(std::shared_ptr<ReadJob> job, Result<void> result);

  Geometry geometry_;
  std::unique_ptr<Level> level_;
  std::vector<Member*> members_;
  uint64_t data_offset_;
  uint32_t sector_;
  std::array<std::atomic<bool>, Geometry::kMaxMembers> active_{};
  std::atomic<uint64_t> read_cursor_{0};  // spreads mirror reads over the copies

  StripeLocks locks_;
  WriteIntent* intent_ = nullptr;
  StripeLog* stripe_log_ = nullptr;
  BufferPool parity_pool_;  // P (and Q) of full-stripe writes

  // Runs `then` once every failure reported to the listener is recorded.
  void after_failures_recorded(std::function<void()> then);

  std::mutex listener_mutex_;  // guards listener_, unrecorded_, held_
  FailureListener listener_;
  uint64_t unrecorded_ = 0;  // bit per member whose failure is not yet recorded
  std::vector<std::function<void()>> held_;

  struct AtomicStats {
    std::atomic<uint64_t> full_stripe_writes{0}, full_stripe_bytes{0};
    std::atomic<uint64_t> partial_stripe_writes{0}, partial_stripe_bytes{0};
    std::atomic<uint64_t> rmw_writes{0}, rcw_writes{0}, degraded_writes{0};
    std::atomic<uint64_t> prereads{0}, preread_bytes{0}, degraded_reads{0};
    std::atomic<uint64_t> member_write_ios{0}, member_read_ios{0}, direct_reads{0};
  } stats_;
};

}  // namespace stripefs
