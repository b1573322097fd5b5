// The write-ahead journal: a circular log of transactions (descriptor, block images, commit)
// in an area of a device: a member, a separate fast device (pmem, NVMe), or (later) a range
// of the volume.
//
// A transaction is durable when its callback says so; after a crash, replay() hands back
// every durable transaction, in order, and stops at the first torn or mis-checksummed one:
// a transaction is replayed whole or not at all. Transactions committed while a commit is in
// flight go out together in the next one (group commit): all their blocks in one batch, then
// one flush. Block checksums in the descriptor and the descriptor's in the commit make any
// torn or reordered write detectable, so the commit block needs no write barrier of its own.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "journal/log_format.hpp"
#include "raid/aligned_buffer.hpp"
#include "raid/member.hpp"

namespace stripefs {

// One block of a transaction: its home address (opaque to the journal) and its new image,
// kJournalBlockSize bytes, sector-aligned, owned by the caller until the commit callback.
struct JournalBlock {
  uint64_t target;
  std::span<const std::byte> data;
  // data_block_checksum() of `data` when its owner handed it over, if the owner says: a
  // block that no longer has it (changed since: a stable-pages violation, memory written
  // from elsewhere) is not journaled; its transaction fails with EIO.
  std::optional<uint32_t> sealed = std::nullopt;
};

struct JournalStats {
  uint64_t transactions = 0;    // committed
  uint64_t batches = 0;         // group commits: transactions / batches = grouping
  uint64_t blocks_written = 0;  // padding included
  uint64_t padding_blocks = 0;  // written only to end a batch on an alignment boundary
  uint64_t flushes = 0;
};

class Journal {
 public:
  // Writes an empty journal of `blocks` blocks at byte `offset` of `device`.
  static Result<void> format(Member& device, uint64_t offset, uint64_t blocks,
                             const Uuid& array_uuid);
  // Opens a journal; replay() must run before the first commit. With `align_bytes` (a
  // multiple of the block size; a RAID5/6 volume's stripe), a group commit is padded to
  // end on a multiple of it in `device`'s bytes, so the log is written in whole units (see
  // log_format.hpp), unless the padding would outgrow the batch: then it ends where it
  // ends. Replay needs no alignment: padding is recorded in the commit.
  static Result<std::unique_ptr<Journal>> open(Member& device, uint64_t offset,
                                               const Uuid& array_uuid, uint64_t align_bytes = 0);
  ~Journal();

  using Apply = std::function<Result<void>(uint64_t target, std::span<const std::byte> data)>;
  // Hands every durable transaction's blocks to `apply`, oldest first, and positions the log
  // after the last one. Returns the last replayed sequence (0: none). If it replayed any,
  // the caller makes their home writes durable and checkpoints them before the first commit.
  // Reads the whole log: new sequences start above any valid-looking record anywhere in it.
  // (Group commit flushes once per batch, so a crash can tear one transaction and keep a
  // later one; reusing the torn one's sequence would make that survivor valid.) Blocking.
  Result<uint64_t> replay(const Apply& apply);
  // Reads the log as replay() would, applying and writing nothing: the sequence of the
  // newest durable transaction (its tail's sequence - 1 when none is live). How the copies
  // of a mirrored journal are compared after a crash. Blocking.
  Result<uint64_t> newest_durable();
  // Hands every durable transaction's blocks to `apply`, oldest first, as replay() would,
  // and writes nothing (a read-only filesystem check reads through them). Returns the last
  // one's sequence (0: none). The journal takes no commit after it. Blocking.
  Result<uint64_t> read_durable(const Apply& apply);
  // The sequence of the oldest transaction the journal superblock still holds: how far
  // checkpoints got.
  uint64_t tail_sequence() const;

  // Commits a transaction (any number of blocks: past kMaxDescriptorEntries it chains
  // descriptors, still replayed whole or not at all); `done` gets its sequence once it is
  // durable, or ENOSPC when the log has no room for it before a checkpoint. Thread-safe.
  // A batch whose write or flush fails leaves the journal failed: every later commit gets
  // EIO, since replay would stop at the hole and nothing may follow it.
  void commit(std::vector<JournalBlock> blocks, std::function<void(Result<uint64_t>)> done);
  Result<uint64_t> commit(std::vector<JournalBlock> blocks);  // blocking

  // Every transaction up to `sequence` reached its home location durably: its log space is
  // released (the journal superblock's tail moves past it). The space is reused only after
  // the new tail is durable, and the journal's lock is never held across that write. A
  // batch's commit callbacks all run before any later batch completes, so a checkpoint up to
  // a sequence the caller has heard of cannot release a transaction whose owner has not
  // registered it yet. Blocking.
  Result<void> checkpoint(uint64_t sequence);

  uint64_t capacity_blocks() const { return capacity_; }
  uint64_t used_blocks() const;
  JournalStats stats() const;

 private:
  struct Pending {
    std::vector<JournalBlock> blocks;
    std::function<void(Result<uint64_t>)> done;
  };
  struct Live {  // a committed transaction still in the log
    uint64_t sequence;
    uint64_t position;
    uint64_t length;  // blocks, descriptor and commit included
  };
  struct Batch;

  Journal(Member& device, uint64_t offset, JournalSuperblock superblock, uint64_t align_blocks);
  // Blocks from `position` to the next alignment boundary, or to the end of the area if
  // that comes first (the log then wraps to block 1).
  uint64_t padding_after(uint64_t position) const;
  // With mutex_ held: walks the log from the tail, handing each durable transaction's blocks
  // to `apply` (if any), and positions the log after the last one.
  Result<void> scan_locked(const Apply& apply);
  uint64_t byte_offset(uint64_t position) const { return offset_ + position * kJournalBlockSize; }
  uint64_t advance(uint64_t position, uint64_t by) const;
  struct Refusal {
    std::function<void(Result<uint64_t>)> done;
    Error why;
  };
  std::unique_ptr<Batch> take_batch_locked(std::vector<Refusal>& refused);
  void submit_batch(std::unique_ptr<Batch> batch);
  void batch_written(std::unique_ptr<Batch> batch, Result<void> result);

  Member& device_;
  const uint64_t offset_;
  const uint64_t capacity_;  // log blocks: the area less its superblock
  const uint64_t align_;     // blocks; 1: no padding

  std::mutex checkpoint_mutex_;  // serializes checkpoints; taken before mutex_
  mutable std::mutex mutex_;     // guards everything below; never held across I/O
  JournalSuperblock superblock_;
  uint64_t head_ = 1;  // where the next transaction goes
  uint64_t next_sequence_ = 1;
  uint64_t used_ = 0;  // log blocks held by live transactions
  std::deque<Live> live_;
  std::vector<Pending> pending_;
  bool in_flight_ = false;
  Live in_flight_first_{};  // the first transaction of the batch in flight
  bool replayed_ = false;
  uint64_t sequence_jump_ = 0;   // after replay: where new sequences must start (0: none)
  std::optional<Error> failed_;  // a write failed: the log has a hole, nothing may follow it
  AlignedBuffer filler_{kJournalBlockSize};  // zeros, written as padding
  JournalStats stats_;
};

}  // namespace stripefs
