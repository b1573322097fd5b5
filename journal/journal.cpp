#include "journal/journal.hpp"

#include <cstring>
#include <optional>

#include "journal/journal_log.hpp"
#include "raid/io_batch.hpp"
#include "raid/wait.hpp"

namespace stripefs {

struct Journal::Batch {
  struct Transaction {
    uint64_t sequence;
    uint64_t position;
    uint64_t length;  // padding included
    uint32_t padding = 0;
    std::vector<AlignedBuffer> descriptors;  // one per kMaxDescriptorEntries blocks
    AlignedBuffer commit;
    Pending pending;
  };
  std::vector<Transaction> transactions;
};

namespace {

using Block = std::span<std::byte, kJournalBlockSize>;
using ConstBlock = std::span<const std::byte, kJournalBlockSize>;

Block block(AlignedBuffer& buffer) {
  return Block(buffer.data(), kJournalBlockSize);
}
ConstBlock const_block(const AlignedBuffer& buffer) {
  return ConstBlock(buffer.data(), kJournalBlockSize);
}

// The highest sequence that a descriptor or commit block among the `blocks` journal blocks
// from device byte `offset` carries (0: none). Replay looks at every block of the log, so
// they are read a piece of up to kScanBytes at a time: one request per block made a mount
// on four loop devices take 0.9 s, its two logs read in 10,000 requests through the ring.
Result<uint64_t> highest_sequence(Member& device, uint64_t offset, uint64_t blocks) {
  constexpr uint64_t kScanBytes = 1u << 20;
  constexpr uint64_t kPieceBlocks = kScanBytes / kJournalBlockSize;
  AlignedBuffer piece(std::min(blocks, kPieceBlocks) * kJournalBlockSize);
  uint64_t highest = 0;
  for (uint64_t done = 0; done < blocks;) {
    const uint64_t n = std::min(kPieceBlocks, blocks - done);
    const std::span<std::byte> read = piece.span().first(n * kJournalBlockSize);
    if (auto r = member_read(device, offset + done * kJournalBlockSize, read); !r) {
      return fail(r.error());
    }
    for (uint64_t i = 0; i < n; ++i) {
      const ConstBlock raw(read.data() + i * kJournalBlockSize, kJournalBlockSize);
      if (auto d = decode_journal_descriptor(raw, 0)) highest = std::max(highest, d->sequence);
      if (auto c = decode_journal_commit(raw, 0)) highest = std::max(highest, c->sequence);
    }
    done += n;
  }
  return highest;
}

}  // namespace

Result<void> Journal::format(Member& device, uint64_t offset, uint64_t blocks,
                             const Uuid& array_uuid) {
  if (blocks < 8) return fail(EINVAL, "journal of {} blocks is too small (at least 8)", blocks);
  if (offset % kJournalBlockSize != 0 || offset + blocks * kJournalBlockSize > device.size()) {
    return fail(EINVAL, "journal area at byte {} of {} blocks does not fit {} ({} bytes)", offset,
                blocks, device.name(), device.size());
  }
  // The first log block is zeroed so a fresh journal replays nothing.
  AlignedBuffer zero(kJournalBlockSize);
  zero.zero();
  if (auto w = member_write(device, offset + kJournalBlockSize, zero.span()); !w) return w;
  JournalSuperblock sb;
  sb.array_uuid = array_uuid;
  sb.blocks = blocks;
  AlignedBuffer encoded(kJournalBlockSize);
  encode_journal_superblock(sb, block(encoded));
  if (auto w = member_write(device, offset, encoded.span(), /*fua=*/true); !w) return w;
  return member_flush(device);
}

Result<std::unique_ptr<Journal>> Journal::open(Member& device, uint64_t offset,
                                               const Uuid& array_uuid, uint64_t align_bytes) {
  if (align_bytes % kJournalBlockSize != 0) {
    return fail(EINVAL, "journal on {}: alignment {} is not a multiple of {}", device.name(),
                align_bytes, kJournalBlockSize);
  }
  AlignedBuffer raw(kJournalBlockSize);
  if (auto r = member_read(device, offset, raw.span()); !r) return fail(r.error());
  auto sb = decode_journal_superblock(const_block(raw), device.name(), array_uuid);
  if (!sb) return fail(sb.error());
  if (offset + sb->blocks * kJournalBlockSize > device.size()) {
    return fail(EINVAL, "member {}: journal blocks {} run past the end of the device",
                device.name(), sb->blocks);
  }
  const uint64_t align = std::max<uint64_t>(1, align_bytes / kJournalBlockSize);
  // Room for two whole units (and the superblock), or padding could fill the log.
  if (align > 1 && sb->blocks < 2 * align + 1) {
    return fail(EINVAL, "journal on {}: {} blocks cannot hold two aligned units of {} blocks",
                device.name(), sb->blocks, align);
  }
  return std::unique_ptr<Journal>(new Journal(device, offset, *sb, align));
}

Journal::Journal(Member& device, uint64_t offset, JournalSuperblock superblock,
                 uint64_t align_blocks)
    : device_(device),
      offset_(offset),
      capacity_(superblock.blocks - 1),
      align_(align_blocks),
      superblock_(superblock),
      head_(superblock.tail),
      next_sequence_(superblock.tail_sequence) {
  filler_.zero();
}

Journal::~Journal() {
  // Commits in flight hold a pointer to us: wait for them.
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (!in_flight_ && pending_.empty()) return;
    }
    std::this_thread::yield();
  }
}

uint64_t Journal::advance(uint64_t position, uint64_t by) const {
  return 1 + (position - 1 + by) % capacity_;
}

uint64_t Journal::padding_after(uint64_t position) const {
  if (align_ <= 1) return 0;
  const uint64_t block = offset_ / kJournalBlockSize + position;  // in the device's blocks
  const uint64_t to_boundary = (align_ - block % align_) % align_;
  return std::min(to_boundary, capacity_ + 1 - position);
}

// A transaction is [descriptor, its blocks]... then one commit: a descriptor lists at most
// kMaxDescriptorEntries blocks, so a larger transaction chains several, all of one sequence.
// The commit counts every block and carries the first descriptor's checksum.
Result<void> Journal::scan_locked(const Apply& apply) {
  uint64_t position = superblock_.tail;
  uint64_t sequence = superblock_.tail_sequence;
  uint64_t used = 0;
  std::deque<Live> live;
  AlignedBuffer raw(kJournalBlockSize);
  for (;;) {
    std::vector<uint64_t> targets;
    std::vector<AlignedBuffer> data;
    std::optional<uint32_t> first_descriptor;
    uint64_t at = position, length = 0;
    bool committed = false;
    for (;;) {
      if (used + length + 1 > capacity_) break;
      if (auto r = member_read(device_, byte_offset(at), raw.span()); !r) return fail(r.error());
      if (first_descriptor) {
        auto commit = decode_journal_commit(const_block(raw), sequence);
        if (commit) {
          committed = commit->count == targets.size() &&
                      commit->descriptor_checksum == *first_descriptor &&
                      used + length + 1 + commit->padding <= capacity_;
          length += 1 + commit->padding;
          break;
        }
      }
      auto descriptor = decode_journal_descriptor(const_block(raw), sequence);
      if (!descriptor) break;  // the end of the log, or torn
      if (!first_descriptor) first_descriptor = descriptor_checksum(const_block(raw));
      ++length;
      at = advance(at, 1);
      bool intact = used + length + descriptor->entries.size() <= capacity_;
      for (size_t i = 0; i < descriptor->entries.size() && intact; ++i, at = advance(at, 1)) {
        data.emplace_back(kJournalBlockSize);
        if (auto r = member_read(device_, byte_offset(at), data.back().span()); !r) {
          return fail(r.error());
        }
        intact =
            data_block_checksum(const_block(data.back())) == descriptor->entries[i].data_checksum;
        targets.push_back(descriptor->entries[i].target);
        ++length;
      }
      if (!intact) break;
    }
    if (!committed) break;  // torn: this transaction never became durable
    for (size_t i = 0; apply && i < targets.size(); ++i) {
      if (auto a = apply(targets[i], data[i].span()); !a) return fail(a.error());
    }
    live.push_back({sequence, position, length});
    used += length;
    position = advance(position, length);
    ++sequence;
  }
  head_ = position;
  next_sequence_ = sequence;
  used_ = used;
  live_ = std::move(live);
  return {};
}

Result<uint64_t> Journal::replay(const Apply& apply) {
  std::lock_guard lock(mutex_);
  if (auto s = scan_locked(apply); !s) return fail(s.error());
  // Group commit writes a batch and then flushes once, so a crash may tear one transaction
  // of a batch while a later one survives. Replay stops at the torn one; if the next commit
  // reused its sequence, the survivor would follow it and look valid. New sequences start
  // above anything valid-looking anywhere in the log.
  auto scanned = highest_sequence(device_, byte_offset(1), capacity_);
  if (!scanned) return fail(scanned.error());
  const uint64_t highest = *scanned;
  if (highest >= next_sequence_) {
    if (live_.empty()) {
      // Nothing to keep: persist the jump now, before the first commit.
      superblock_.tail = head_;
      superblock_.tail_sequence = next_sequence_ = highest + 1;
      AlignedBuffer encoded(kJournalBlockSize);
      encode_journal_superblock(superblock_, block(encoded));
      if (auto w = member_write(device_, offset_, encoded.span(), /*fua=*/true); !w) {
        return fail(w.error());
      }
    } else {
      // Replayed transactions still live: the jump is persisted by the checkpoint that
      // releases them, and commits wait for it.
      sequence_jump_ = highest + 1;
    }
  }
  replayed_ = true;
  return live_.empty() ? 0 : live_.back().sequence;
}

uint64_t Journal::tail_sequence() const {
  std::lock_guard lock(mutex_);
  return superblock_.tail_sequence;
}

Result<uint64_t> Journal::newest_durable() {
  std::lock_guard lock(mutex_);
  if (auto s = scan_locked(nullptr); !s) return fail(s.error());
  return next_sequence_ - 1;
}

Result<uint64_t> Journal::read_durable(const Apply& apply) {
  std::lock_guard lock(mutex_);
  if (auto s = scan_locked(apply); !s) return fail(s.error());
  return live_.empty() ? 0 : live_.back().sequence;
}

void Journal::commit(std::vector<JournalBlock> blocks, std::function<void(Result<uint64_t>)> done) {
  std::unique_ptr<Batch> batch;
  std::vector<Refusal> refused;
  bool ready;
  {
    std::lock_guard lock(mutex_);
    ready = replayed_ && sequence_jump_ == 0;
    if (ready) {
      pending_.push_back({std::move(blocks), std::move(done)});
      batch = take_batch_locked(refused);
    }
  }
  // Callbacks run with no lock held: they may call back into the journal.
  if (!ready) {
    done(fail(EINVAL,
              "journal on {}: replay() and a checkpoint of what it replayed must come "
              "before the first commit",
              device_.name()));
    return;
  }
  for (Refusal& r : refused) r.done(fail(std::move(r.why)));
  if (batch) submit_batch(std::move(batch));
}

Result<uint64_t> Journal::commit(std::vector<JournalBlock> blocks) {
  return wait_for<Result<uint64_t>>([&](std::function<void(Result<uint64_t>)> done) {
    commit(std::move(blocks), std::move(done));
  });
}

// With mutex_ held: every pending transaction that fits goes into one batch; those refused
// are handed back, to be told once the lock is released.
std::unique_ptr<Journal::Batch> Journal::take_batch_locked(std::vector<Refusal>& refused) {
  if (in_flight_ || pending_.empty()) return nullptr;
  if (failed_) {
    for (Pending& p : pending_) {
      refused.push_back(
          {std::move(p.done), Error{EIO, "journal failed earlier: " + failed_->message}});
    }
    pending_.clear();
    return nullptr;
  }
  auto batch = std::make_unique<Batch>();
  for (Pending& p : pending_) {
    const uint64_t count = p.blocks.size();
    const uint64_t descriptors = (count + kMaxDescriptorEntries - 1) / kMaxDescriptorEntries;
    const uint64_t length = count + descriptors + 1;
    if (count == 0) {
      refused.push_back({std::move(p.done), Error{EINVAL, "an empty journal transaction"}});
      continue;
    }
    // The batch's last transaction may need up to align_ - 1 blocks of padding.
    if (used_ + length + (align_ - 1) > capacity_) {
      refused.push_back(
          {std::move(p.done),
           Error{ENOSPC, fmt::format("journal on {} is full ({} of {} blocks in use, {} needed): "
                                     "checkpoint first",
                                     device_.name(), used_, capacity_, length)}});
      continue;
    }
    // The checksums the descriptors carry are of the bytes written now: a block sealed by its
    // owner must still hold what was sealed.
    std::vector<uint32_t> checksums;
    checksums.reserve(count);
    std::optional<uint64_t> changed;
    for (const JournalBlock& b : p.blocks) {
      checksums.push_back(data_block_checksum(ConstBlock(b.data.data(), kJournalBlockSize)));
      if (b.sealed && *b.sealed != checksums.back() && !changed) changed = b.target;
    }
    if (changed) {
      refused.push_back(
          {std::move(p.done),
           Error{EIO, fmt::format("journal on {}: the image for block {} changed after it was "
                                  "handed over (checksum mismatch): not journaled",
                                  device_.name(), *changed)}});
      continue;
    }
    Batch::Transaction t{next_sequence_++, head_, length, 0, {}, AlignedBuffer(kJournalBlockSize),
                         std::move(p)};
    for (uint64_t first = 0; first < count; first += kMaxDescriptorEntries) {
      JournalDescriptor descriptor{t.sequence, {}};
      for (uint64_t i = first; i < std::min<uint64_t>(count, first + kMaxDescriptorEntries); ++i) {
        descriptor.entries.push_back({t.pending.blocks[i].target, checksums[i], 0});
      }
      t.descriptors.emplace_back(kJournalBlockSize);
      encode_journal_descriptor(descriptor, block(t.descriptors.back()));
    }
    head_ = advance(head_, length);
    used_ += length;
    batch->transactions.push_back(std::move(t));
  }
  pending_.clear();
  if (batch->transactions.empty()) return nullptr;
  // The batch ends on an alignment boundary, its last transaction owning the filler, unless
  // that would more than double what it writes: a small commit (an fsync's) stays small.
  Batch::Transaction& last = batch->transactions.back();
  uint64_t batch_blocks = 0;
  for (const Batch::Transaction& t : batch->transactions) batch_blocks += t.length;
  const uint64_t padding = padding_after(head_);
  last.padding = padding <= batch_blocks ? static_cast<uint32_t>(padding) : 0;
  last.length += last.padding;
  head_ = advance(head_, last.padding);
  used_ += last.padding;
  for (Batch::Transaction& t : batch->transactions) {
    encode_journal_commit({t.sequence, static_cast<uint32_t>(t.pending.blocks.size()),
                           descriptor_checksum(const_block(t.descriptors.front())), t.padding},
                          block(t.commit));
  }
  in_flight_ = true;
  const auto& first = batch->transactions.front();
  in_flight_first_ = {first.sequence, first.position, first.length};
  return batch;
}

void Journal::submit_batch(std::unique_ptr<Batch> batch) {
  std::vector<PlannedIo> ios;
  for (Batch::Transaction& t : batch->transactions) {
    uint64_t at = t.position;
    for (size_t i = 0; i < t.pending.blocks.size(); ++i) {
      if (i % kMaxDescriptorEntries == 0) {
        ios.push_back({0, byte_offset(at), t.descriptors[i / kMaxDescriptorEntries].data(),
                       kJournalBlockSize, 0});
        at = advance(at, 1);
      }
      const JournalBlock& b = t.pending.blocks[i];
      ios.push_back(
          {0, byte_offset(at), const_cast<std::byte*>(b.data.data()), kJournalBlockSize, 0});
      at = advance(at, 1);
    }
    ios.push_back({0, byte_offset(at), t.commit.data(), kJournalBlockSize, 0});
    // Filler, so the stripes are written whole; what it holds does not matter.
    for (uint32_t i = 0; i < t.padding; ++i) {
      at = advance(at, 1);
      ios.push_back({0, byte_offset(at), filler_.data(), kJournalBlockSize, 0});
    }
  }
  uint64_t padding = 0;
  for (const Batch::Transaction& t : batch->transactions) padding += t.padding;
  const uint64_t blocks = ios.size();
  Member* members[] = {&device_};
  auto raw = batch.release();
  // Everything at once, then one flush: the checksums tell a torn transaction apart.
  submit_ios(
      members, MemberOp::write, std::move(ios), false,
      [this, raw, blocks, padding](std::vector<FailedIo> failures) {
        std::unique_ptr<Batch> batch(raw);
        if (!failures.empty()) {
          batch_written(std::move(batch), fail(failures[0].error, "journal write on {} failed: {}",
                                               device_.name(), std::strerror(failures[0].error)));
          return;
        }
        {
          std::lock_guard lock(mutex_);
          stats_.blocks_written += blocks;
          stats_.padding_blocks += padding;
        }
        MemberRequest flush;
        flush.op = MemberOp::flush;
        auto* again = batch.release();
        flush.done = [this, again](int64_t result) {
          std::unique_ptr<Batch> batch(again);
          if (result < 0) {
            batch_written(std::move(batch), fail(static_cast<int>(-result),
                                                 "journal flush on {} failed", device_.name()));
          } else {
            batch_written(std::move(batch), {});
          }
        };
        device_.start(std::move(flush));
      });
}

void Journal::batch_written(std::unique_ptr<Batch> batch, Result<void> result) {
  {
    std::lock_guard lock(mutex_);
    ++stats_.batches;
    ++stats_.flushes;
    for (Batch::Transaction& t : batch->transactions) {
      if (result) {
        live_.push_back({t.sequence, t.position, t.length});
        ++stats_.transactions;
      }
    }
    if (!result) {
      // Replay would stop at the hole this batch left and never see what follows it, so
      // nothing may follow: the journal has failed.
      failed_ = result.error();
      journal_log().error("{}", result.error().message);
    }
  }
  // The callbacks run while the batch still counts as in flight, so no later batch can
  // complete (and be acted on) before these transactions are known to their owners.
  for (Batch::Transaction& t : batch->transactions) {
    if (result) {
      t.pending.done(t.sequence);
    } else {
      t.pending.done(fail(result.error()));
    }
  }
  std::unique_ptr<Batch> next;
  std::vector<Refusal> refused;
  {
    std::lock_guard lock(mutex_);
    in_flight_ = false;
    next = take_batch_locked(refused);
  }
  for (Refusal& r : refused) r.done(fail(std::move(r.why)));
  if (next) submit_batch(std::move(next));
}

Result<void> Journal::checkpoint(uint64_t sequence) {
  // One checkpoint at a time, so superblock writes land in order. The journal's mutex is
  // not held across the write: completions (which commit) need it, and may run on the very
  // thread that must complete this write.
  std::lock_guard serial(checkpoint_mutex_);
  AlignedBuffer encoded(kJournalBlockSize);
  size_t released = 0;
  {
    std::lock_guard lock(mutex_);
    while (released < live_.size() && live_[released].sequence <= sequence) ++released;
    if (released == 0) return {};
    // The new tail: the oldest transaction still needed (a live one, else the first of a
    // batch in flight, else where the next one will go).
    JournalSuperblock next = superblock_;
    if (released < live_.size()) {
      next.tail = live_[released].position;
      next.tail_sequence = live_[released].sequence;
    } else if (in_flight_) {
      next.tail = in_flight_first_.position;
      next.tail_sequence = in_flight_first_.sequence;
    } else {
      next.tail = head_;
      if (sequence_jump_ != 0) {
        // Everything replayed is released: the sequence jumps past stale records now.
        next_sequence_ = std::max(next_sequence_, sequence_jump_);
        sequence_jump_ = 0;
      }
      next.tail_sequence = next_sequence_;
    }
    superblock_ = next;
    encode_journal_superblock(next, block(encoded));
  }
  if (auto w = member_write(device_, offset_, encoded.span(), /*fua=*/true); !w) return w;
  // Only now, with the new tail durable, may the released space be written over: before,
  // a crash would replay from the old tail into overwritten blocks and lose everything live.
  std::lock_guard lock(mutex_);
  for (size_t i = 0; i < released && !live_.empty(); ++i) {
    used_ -= live_.front().length;
    live_.pop_front();
  }
  return {};
}

uint64_t Journal::used_blocks() const {
  std::lock_guard lock(mutex_);
  return used_;
}

JournalStats Journal::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace stripefs
