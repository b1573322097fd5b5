// The array as a virtual block device: asynchronous read/write/flush over the members.
//
// Writes: the Volume never copies the caller's data. It splits a write by stripe, locks the
// stripes (ascending), announces the range to the write-intent bitmap, and hands each stripe
// to its level (raid/level.hpp): a full stripe's parity is computed from the caller's
// buffers and those same buffers are submitted to the members; a partial stripe is
// read-modify-written or reconstruct-written, whichever reads less. Buffers must stay live
// and unchanged until the callback runs (stable pages). Reads land directly in the caller's
// buffers, also when a missing member's chunk is rebuilt from parity.
//
// Contracts:
// - Alignment. Every piece's volume offset, length and buffer address are multiples of
//   sector_size(): 512, or the largest logical block of any member if that is bigger. A
//   misaligned or out-of-range request fails with EINVAL before any I/O, and so does a write
//   whose pieces overlap (their bytes would count twice: a false full stripe, a delta
//   applied twice).
// - Callbacks run on any thread: an io_uring I/O thread; the submitting thread (members that
//   complete inside submit(), errors found before any I/O); whichever thread releases a
//   stripe lock; the thread that runs a write-intent `ready`; the thread that calls
//   failure_recorded(), for acknowledgements held until then. The failure listener runs on
//   the thread that noticed the failure.
// - No blocking in completions. Never call a blocking helper from a callback, a failure
//   listener or a `ready` continuation: it waits for a completion that may need the thread
//   it blocks. They are member_read/write/flush, the blocking read/write/flush below,
//   check_stripes, rebuild_member, read_superblock/write_superblock, create_array,
//   assemble, Array::open, Array::close and Array::wait_resync.
// - Lock order. A write takes its stripes' locks in ascending stripe order, and anything else
//   that takes several stripe locks must do the same. A write holds them while it waits for
//   the write intent's `ready`, so a WriteIntent must never wait for a stripe lock. No mutex
//   is held across Member::submit, and a member's `done` must be able to take any lock
//   without deadlocking against its submitter.
// - Failures are recorded before acknowledgement (fail_member below).
//
// Files: volume.cpp (writes, reads, flush), volume_repair.cpp (checking and rebuilding
// stripes: resync, re-add), member_set.* (members in and out of service), level_*.cpp and
// parity_stripe.cpp (what each level does).
#pragma once

#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "raid/aligned_buffer.hpp"
#include "raid/buffer_pool.hpp"
#include "raid/geometry.hpp"
#include "raid/io_batch.hpp"
#include "raid/level.hpp"
#include "raid/member.hpp"
#include "raid/member_set.hpp"
#include "raid/result.hpp"
#include "raid/scrub_check.hpp"
#include "raid/stripe_io.hpp"
#include "raid/stripe_locks.hpp"
#include "raid/stripe_log.hpp"
#include "raid/volume_stats.hpp"
#include "raid/write_intent.hpp"

namespace stripefs {

class Join;

class Volume {
 public:
  using Callback = std::function<void(Result<void>)>;
  using FailureListener = MemberSet::FailureListener;

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
  bool active(unsigned member) const { return members_.active(member); }
  unsigned missing_members() const { return members_.missing(); }
  // True when some data can no longer be read or written (beyond the level's redundancy).
  bool failed() const;
  // Takes a member out of service (an I/O error, or an operator's request). The listener
  // hears of it once per member, on the thread that noticed, and must then record it durably
  // and call failure_recorded(): until then, writes and flushes are not acknowledged (as md
  // holds writes until its superblock update), so a crash can never bring back the failed
  // member as if it were current. Held writes keep their stripe locks meanwhile.
  void fail_member(unsigned member, const Error& why) { members_.fail(member, why); }
  void set_failure_listener(FailureListener listener) {
    members_.set_failure_listener(std::move(listener));
  }
  void failure_recorded(unsigned member) { members_.failure_recorded(member); }
  Member* member(unsigned index) const { return members_[index]; }
  // Re-adding a member that was away (md's re-add with a bitmap), before any I/O: hold_out
  // keeps it out of service silently; rebuild_member rewrites its chunks of stripes
  // [first, first+count) from the members in service, under each stripe's lock (blocking);
  // restore_member puts it back once everything it missed is rebuilt.
  void hold_out(unsigned member) { members_.hold_out(member); }
  // `target_failed`, if given, is set when the member itself refused a write. A source that
  // fails to read is taken out of service, and the stripe rebuilt from what is left.
  // `needed`, if given, is asked once per batch, under the batch's stripe locks (so no write
  // to them is in flight), for which of its stripes need rebuilding; the others are only
  // counted in sync (a re-add at run time: the bitmap says what the member missed).
  using NeededStripes = std::function<std::function<bool(uint64_t stripe)>()>;
  // `rebuilt`, if given, is increased by the stripes actually rebuilt. `batch_done`, if
  // given, is called as each batch is written and in sync, with the stripe it ends before
  // (in order, on the calling thread, with later batches' locks held: no Volume I/O from
  // it); false stops the rebuild there, the batches already under way finished first.
  // Batches overlap: the next one is read while this one is rebuilt and the last written.
  using BatchDone = std::function<bool(uint64_t end)>;
  Result<void> rebuild_member(unsigned member, uint64_t first, uint64_t count,
                              bool* target_failed = nullptr, const NeededStripes& needed = nullptr,
                              uint64_t* rebuilt = nullptr, const BatchDone& batch_done = nullptr);
  void restore_member(unsigned member) { members_.restore(member); }

  // Rebuilding onto a new device while the array is in use (md's recovery): role `member`,
  // out of service, gets `device` (which must outlive the Volume), in sync below stripe
  // `recovered` (0 for a blank device; a checkpoint when resuming). rebuild_member then
  // rebuilds it stripe by stripe and moves its recovery point up as it goes, so writes to
  // rebuilt stripes reach it; finish_recovery puts it in service once every stripe is
  // rebuilt. A device that fails a write meanwhile is failed like any member.
  void start_recovery(unsigned member, Member* device, uint64_t recovered) {
    members_.start_recovery(member, device, recovered);
  }
  bool recovering(unsigned member) const { return members_.recovering(member); }
  uint64_t recovered(unsigned member) const { return members_.recovered(member); }
  void finish_recovery(unsigned member) { members_.finish_recovery(member); }
  // Role `member`, in service, is served by `device` from now on (MemberSet::swap_device):
  // a hot replace's ReplacingMember, then the replacement.
  void swap_member(unsigned member, Member* device) { members_.swap_device(member, device); }
  // Which device a role holds, and which one its last failure was about (MemberSet).
  uint64_t incarnation(unsigned member) const { return members_.incarnation(member); }
  uint64_t failed_incarnation(unsigned member) const { return members_.failed_incarnation(member); }

  // Read errors (volume_heal.cpp), as md's fix_read_error: a member that fails a read while
  // the array could do without it is not failed at once. Under the stripe's lock, the bytes
  // are read from another copy or rebuilt from parity (the caller gets them), written back
  // to the member (a disk remaps a bad sector when it is written) and read back to check.
  // If that works, the error counts as corrected on the device (Member::count_corrected)
  // and `listener` hears of it; once a device has more than `max` corrected errors it is
  // failed. If the write or the check fails, the member is failed then. max 0: every read
  // error fails its member at once. Set both before the first read.
  using CorrectedListener =
      std::function<void(unsigned member, uint64_t corrected, uint64_t member_offset)>;
  void set_read_error_policy(uint32_t max, CorrectedListener listener) {
    max_read_errors_.store(max, std::memory_order_relaxed);
    if (listener) corrected_listener_ = std::move(listener);
  }
  uint32_t max_read_errors() const { return max_read_errors_.load(std::memory_order_relaxed); }
  static constexpr uint32_t kDefaultMaxReadErrors = 20;  // md's max_read_errors

  // Every write is announced to `intent` (the write-intent bitmap) before any of its data
  // reaches a member: once it holds its stripe locks, a write calls begin_write for the
  // member data range its stripes occupy (member_range), sends nothing until `ready` runs,
  // and calls end_write when all its stripes are done. Set before the first write; `intent`
  // must outlive the Volume's I/O.
  void set_write_intent(WriteIntent* intent) { intent_ = intent; }
  // Every partial-stripe write of a parity level is made durable in `log` before it is
  // written in place; full stripes bypass it, once its before_bypass barrier lets them.
  // Set before the first write.
  void set_stripe_log(StripeLog* log) { io_.stripe_log = log; }
  // The member data-area range [begin, end) that stripes [first, last] occupy.
  std::pair<uint64_t, uint64_t> member_range(uint64_t first_stripe, uint64_t last_stripe) const;
  // The stripes [first, last] with a chunk in member data-area range [begin, end).
  std::pair<uint64_t, uint64_t> stripes_of(uint64_t begin, uint64_t end) const;

  // Reads stripes [first, first+count) from every member and counts those whose parity does
  // not match their data, or whose mirror copies differ. With `repair`, also rewrites the
  // parity from the data (mirrors: the other copies from the first), under each stripe's
  // lock so it may run beside writes: that is resync. Degraded, a missing chunk stands as
  // the others rebuild it, and what redundancy is left is checked against it (RAID6 with
  // one member out: the other parity; mirrors: the copies left); with none left there is
  // nothing to check. A chunk that cannot be read is healed as a read is (md's resync does
  // too): rebuilt from the rest, written back and read back, counted a corrected error; the
  // member is failed when that fails, or when healing is off, and the stripe checked without
  // it. An error only when the stripe cannot be rebuilt. Blocking.
  Result<uint64_t> check_stripes(uint64_t first, uint64_t count, bool repair);
  Result<uint64_t> count_inconsistent_stripes(uint64_t first, uint64_t count) {
    return check_stripes(first, count, false);
  }

  // Scrub (md's check and repair, without its guess): reads stripes [first, first+count)
  // from every member, each under its lock, and checks each stripe's redundancy and, given
  // `check`, every data block (every copy on a mirror) against what it should hold. A
  // stripe that disagrees or holds a block that fails its check is looked at a block-sized
  // row at a time: the fewest chunks that, left out and rebuilt from the others, give a row
  // that agrees with itself and passes every check are the bad ones (RAID6's syndromes,
  // the odd copy out of three, or with checksums the chunk that fails or P when all the
  // data passes). Bad chunks are logged with member and offset and, with `repair`,
  // rewritten. A row where nothing fits, or two different answers fit equally well (RAID5
  // or two copies without a checksum to tell), is counted unrepairable and left as it is:
  // nothing is rewritten on a guess, and parity is never made to match data that fails its
  // checksum. Needs every member. Blocking; adds to `counts`.
  struct ScrubCounts {
    uint64_t stripes = 0;              // checked
    uint64_t mismatched = 0;           // whose redundancy disagreed, or a block failed its check
    uint64_t repaired = 0;             // whose bad chunks were named and rewritten
    uint64_t unrepairable = 0;         // with a row in which nothing could be named
    uint64_t bad_data = 0;             // data chunks (mirror copies) named bad
    uint64_t bad_parity = 0;           // P and Q chunks named bad
    uint64_t verified_blocks = 0;      // data blocks with a check, checked
    uint64_t checksum_failures = 0;    // ... that failed it as read
    std::vector<uint64_t> bad_chunks;  // per member: chunks named bad
    void add(const ScrubCounts& more);
  };
  // The read buffers of scrub_stripes, kept by a caller that scrubs in many calls (the
  // background scrub: a call per round) so that no call allocates, and faults in, its own.
  struct ScrubBuffers {
    std::vector<AlignedBuffer> reads;    // per worker, its batches in flight: one per member
    std::vector<AlignedBuffer> scratch;  // per worker
    uint64_t allocations = 0;            // times `reads` was allocated (once, for one volume)
  };
  Result<void> scrub_stripes(uint64_t first, uint64_t count, bool repair, ScrubCounts& counts,
                             const ScrubBatch* check = nullptr, ScrubBuffers* buffers = nullptr);
  // Stripes scrub_stripes reads and judges at a time (a batch; scrub_inline_batch() where
  // the reads complete as they are submitted), and batches in flight (all workers together).
  uint64_t scrub_batch() const;
  uint64_t scrub_inline_batch() const;
  unsigned scrub_depth() const;
  // Threads that judge batches in one scrub_stripes call, the caller's included: `workers`,
  // or with 0 (the default) one per CPU this process may use, at most kMaxScrubWorkers;
  // never more than the call has batches. Set before a scrub starts.
  void set_scrub_workers(unsigned workers) { scrub_workers_ = workers; }
  unsigned scrub_workers(uint64_t batches) const;

  // Checksum recovery (volume_recover.cpp): bytes [offset, offset + data.size()) of the
  // volume, within one chunk, read without error but failed the caller's check (`good`, a
  // checksum of what they should hold). Under the stripe's lock, the bytes are looked for
  // where they live: as the members hold them (read again: every copy on a mirror), then,
  // on a parity level, rebuilt with their own chunk left out, and on RAID6 with one other
  // chunk left out as well (a data chunk and P both bad). The first contents that pass go
  // to `data`; every chunk found wrong is rewritten from them and read back
  // (Member::count_checksum_error, logged with member and offset); a member being rebuilt
  // that is past this stripe counts as one of them. EIO when nothing passes
  // (no copy left is good: the caller must not return the bytes), or on a level without
  // redundancy. A member that fails a read meanwhile is left out, not failed here; one that
  // fails the rewrite or its read back is failed. Blocking: never from a completion.
  // With `rewrite` false (a read-only check), the wrong chunks are only named: nothing is
  // written and nothing counted.
  struct Recovered {
    std::vector<unsigned> rewritten;  // members whose chunk was wrong (now rewritten)
  };
  using BlockCheck = std::function<bool(std::span<const std::byte>)>;
  Result<Recovered> recover_block(uint64_t offset, std::span<std::byte> data,
                                  const BlockCheck& good, bool rewrite = true);

  VolumeStats stats() const { return stats_.snapshot(); }
  // Where the full-stripe parity buffers live: register it with the members' IoEngine
  // (IoEngine::register_buffer) so parity writes go out as fixed-buffer writes.
  std::span<std::byte> parity_arena() const { return parity_pool_.arena(); }

 private:
  struct WriteJob;

  Volume(Geometry geometry, std::vector<Member*> members, uint64_t data_offset, uint32_t sector);
  static size_t parity_arena_buffers(const Geometry& geometry);

  Result<void> check_pieces(const std::vector<VolumePiece>& pieces) const;

  // Write path (volume.cpp).
  void lock_next(std::shared_ptr<WriteJob> job);
  void start_write(std::shared_ptr<WriteJob> job);
  void issue_write(std::shared_ptr<WriteJob> job);
  void finish_write(std::shared_ptr<WriteJob> job, Result<void> result);

  // Read path (volume.cpp).
  bool read_one(const VolumePiece& segment, Callback& done);
  void read_segments(std::shared_ptr<Join> join, std::vector<VolumePiece> segments);
  // `segment` failed to read from `member` at `member_offset` with `error` (volume_heal.cpp):
  // healed (see set_read_error_policy), or the member failed and the segment read again.
  void read_failed(const VolumePiece& segment, unsigned member, uint64_t member_offset, int error,
                   Callback done);
  struct Healing;
  void heal(std::shared_ptr<Healing> healing);
  void healed(std::shared_ptr<Healing> healing, Result<void> rewritten);
  // A read error on `member` at `member_offset` was corrected (`why`): logged, told to the
  // corrected-error listener, and the member failed past max_read_errors.
  void note_corrected(unsigned member, uint64_t member_offset, const std::string& why);
  // Whether a read error on `member` may be healed: healing on, the member in service, and
  // the array able to do without it.
  bool healable(unsigned member) const;
  // The blocking heal of a chunk `member` could not read at `offset` (`why`), its contents
  // rebuilt by the caller (who holds its stripe's lock): written back, read back into
  // `scratch` and compared, then counted (note_corrected); if that fails, the member is
  // failed. Whether the member is still in service.
  bool rewrite_unreadable(unsigned member, uint64_t offset, std::span<const std::byte> contents,
                          std::span<std::byte> scratch, const std::string& why);

  // Checking and rebuilding a stripe (volume_repair.cpp).
  Result<bool> check_stripe(uint64_t stripe, bool repair, std::span<std::byte> rows,
                            std::span<std::byte> expected);
  static constexpr int kTargetFailed = -1;  // rebuild_member: the target refused the write
  // A batch of stripes being rebuilt (volume_rebuild.cpp): read_rows plans its rows and
  // submits their reads; rebuild_rows waits for them, rebuilds the member's chunks in the
  // batch's scratch, and returns the writes that put them on the member.
  struct RebuildBatch;
  void read_rows(unsigned member, RebuildBatch& batch);
  Result<std::vector<PlannedIo>> rebuild_rows(unsigned member, RebuildBatch& batch);
  // Stripes per rebuild_rows batch: about kRebuildBatchBytes of each member.
  static constexpr uint64_t kRebuildBatchBytes = 4u << 20;
  uint64_t rebuild_batch() const;
  // Stripes per scrub batch: about kScrubBatchBytes of each member (volume_scrub.cpp), and
  // batches in flight: as many as keep about kScrubInFlightBytes of each member in flight,
  // at least 2 (one judged, one read) and at most kMaxScrubDepth. Measured, stripefs-bench
  // rebuild, RAID5 of 4 on tmpfs (2026-12-07, 64 KiB chunks), scrub MiB/s in the runs
  // whose every-member-read baseline was ~7,500 MiB/s: batch 256 KiB at depth 2 ~3,400,
  // 256 KiB at 8 ~4,350, 512 KiB at 4 ~4,400, 512 KiB at 8 ~4,700, 1 MiB at 4 ~5,000.
  // On tmpfs the reads are copies that one io-wq worker does one after another, so
  // what counts is how much is queued for it while a batch is judged. (2026-12-05: 4 MiB
  // batches at depth 2 gave 0.05 of the baseline, 1 MiB 0.45, 256 KiB 0.50-0.70.)
  static constexpr uint64_t kScrubBatchBytes = 1u << 20;
  // A member driven inline (a tmpfs file, memory) is read by the scrub's own thread: a batch
  // of about this much of each member (four members: 1 MiB, this CPU's L2) is still in the
  // cache when it is judged. Measured (stripefs-bench rebuild --inline, RAID5 of 4, 64 KiB
  // chunks, two workers, three alternating runs each, 2026-12-07): scrub 8,642-11,717 MiB/s
  // with 256 KiB against 6,084-10,120 with 1 MiB; through the ring 1 MiB stays better
  // (median ratios 0.82-0.89 against 0.63-0.77).
  static constexpr uint64_t kScrubInlineBatchBytes = 256u << 10;
  static constexpr uint64_t kScrubInFlightBytes = 4u << 20;
  static constexpr unsigned kMaxScrubDepth = 4;
  // Workers by default, at most (scrub_workers()).
  static constexpr unsigned kMaxScrubWorkers = 4;
  unsigned scrub_workers_ = 0;

  Geometry geometry_;
  std::unique_ptr<Level> level_;
  MemberSet members_;
  uint64_t data_offset_;
  uint32_t sector_;
  std::atomic<uint64_t> read_cursor_{0};  // spreads mirror reads over the copies

  StripeLocks locks_;
  std::mutex rebuild_mutex_;  // guards rebuild_scratch_ (three batches): one rebuild at a time
  AlignedBuffer rebuild_scratch_;
  WriteIntent* intent_ = nullptr;
  std::atomic<uint32_t> max_read_errors_{kDefaultMaxReadErrors};
  CorrectedListener corrected_listener_;  // set before the first read
  BufferPool parity_pool_;                // P (and Q) of full-stripe writes
  VolumeCounters stats_;
  StripeIo io_;  // what the level's I/O works with: the members above and the stripe log
};

}  // namespace stripefs
