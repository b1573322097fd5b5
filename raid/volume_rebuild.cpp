// Rebuilding a member that was away or onto a new device (rebuild_member), in batches of
// stripes under their locks, so user I/O goes on beside.
//
// md's recovery reads whole runs of each source member, not a chunk at a time, so a rebuild
// goes at the members' streaming speed; and it keeps the members busy at once. Here three
// batches are under way together: the next one's reads are in flight while this one is
// rebuilt and the last one's write is in flight. On devices a batch then costs one transfer,
// not a read, a computation and a write one after another. Each batch holds its stripes'
// locks (taken in ascending order, as writes take theirs) from before its reads until its
// write is done, and counts as in sync only then.
#include <algorithm>
#include <cstring>
#include <future>
#include <memory>
#include <optional>

#include "raid/aligned_buffer.hpp"
#include "raid/io_batch.hpp"
#include "raid/volume.hpp"

namespace stripefs {

struct Volume::RebuildBatch {
  struct Row {
    std::vector<std::byte*> slots;  // the stripe's redundancy set, in scratch
    std::vector<unsigned> missing;  // slots not read (out of service)
    size_t mine = 0;                // the member's slot
    uint64_t member_offset = 0;
  };
  uint64_t at = 0, end = 0;  // stripes [at, end)
  std::span<std::byte> scratch;
  std::function<bool(uint64_t)> needed;  // asked once, under the batch's locks
  std::vector<Row> rows;
  std::future<std::vector<FailedIo>> read;
  std::future<std::vector<FailedIo>> written;
};

uint64_t Volume::rebuild_batch() const {
  return std::max<uint64_t>(1, kRebuildBatchBytes / geometry_.chunk_size());
}

Result<void> Volume::rebuild_member(unsigned member, uint64_t first, uint64_t count,
                                    bool* target_failed, const NeededStripes& needed,
                                    uint64_t* rebuilt, const BatchDone& batch_done) {
  if (member >= members_.size() || members_[member] == nullptr || active(member)) {
    return fail(EINVAL, "member {} is not held out for a rebuild", member);
  }
  const bool recovering = members_.recovering(member);
  const uint64_t incarnation = members_.incarnation(member);  // the device being rebuilt
  const uint64_t last = std::min(first + count, geometry_.stripes());
  std::lock_guard scratch_lock(rebuild_mutex_);
  const uint64_t batch = rebuild_batch();
  const uint64_t slot = batch * geometry_.members() * geometry_.chunk_size();
  if (rebuild_scratch_.size() < 3 * slot) rebuild_scratch_ = AlignedBuffer(3 * slot);

  const auto unlock = [this](const RebuildBatch& b) {
    for (uint64_t stripe = b.at; stripe < b.end; ++stripe) locks_.release(stripe);
  };
  const auto report = [&](const RebuildBatch& b, const Error& e) {
    if (target_failed != nullptr && e.code == kTargetFailed) *target_failed = true;
    return fail(e.code == kTargetFailed ? EIO : e.code,
                "rebuilding member {} ({}), stripes {}-{}: {}", member, members_[member]->name(),
                b.at, b.end - 1, e.message);
  };
  uint64_t index = 0;
  const auto start = [&](uint64_t at) {
    RebuildBatch b;
    b.at = at;
    b.end = std::min(at + batch, last);
    b.scratch = rebuild_scratch_.span().subspan(index++ % 3 * slot, slot);
    for (uint64_t stripe = b.at; stripe < b.end; ++stripe) locks_.lock(stripe);
    if (needed) b.needed = needed();
    read_rows(member, b);
    return b;
  };
  bool stopping = false;
  // Waits for the batch's write; then it is in sync (the next write to its stripes goes to
  // the member too), counted, and unlocked.
  const auto finish = [&](RebuildBatch& b) -> Result<void> {
    const std::vector<FailedIo> failed = b.written.get();
    if (!failed.empty()) {
      const Error why{failed[0].error, fmt::format("{}: write failed: {}", members_[member]->name(),
                                                   std::strerror(failed[0].error))};
      if (members_.recovering(member) && members_.incarnation(member) == incarnation) {
        members_.fail(member, why);
      }
      unlock(b);
      return report(b, Error{kTargetFailed, why.message});
    }
    // A device that failed meanwhile, or gave the role to another (whose rebuild starts from
    // its own point), is not moved on: the batch's writes reached a member out of sync.
    if (recovering && !members_.set_recovered(member, b.end, incarnation)) {
      unlock(b);
      return report(b, Error{EIO,
                             "the member left its rebuild (failed, or another device "
                             "took the role)"});
    }
    if (rebuilt != nullptr) *rebuilt += b.rows.size();
    unlock(b);
    if (batch_done && !batch_done(b.end)) stopping = true;
    return {};
  };

  std::optional<RebuildBatch> reading, writing;
  if (first < last) reading = start(first);
  Result<void> status;
  while (reading) {
    RebuildBatch current = std::move(*reading);
    reading.reset();
    if (!stopping && current.end < last) reading = start(current.end);
    Result<std::vector<PlannedIo>> writes = rebuild_rows(member, current);
    // One write in flight at a time: the last batch's ends before this one's starts.
    if (writing) {
      status = finish(*writing);
      writing.reset();
    }
    if (status && !writes) status = report(current, writes.error());
    if (!status) {
      unlock(current);
      break;
    }
    current.written = submit_ios_async(members_.all(), MemberOp::write, std::move(*writes));
    writing = std::move(current);
  }
  // Whatever is still under way ends before the locks go (an error left it there).
  if (reading) {
    reading->read.wait();
    unlock(*reading);
  }
  if (writing) {
    const Result<void> last_write = finish(*writing);
    if (status) status = last_write;
  }
  return status;
}

// Plans the batch's rows (which chunks each stripe's set has on members in service) and
// submits their reads, one merged request per source run.
void Volume::read_rows(unsigned member, RebuildBatch& b) {
  const uint64_t chunk = geometry_.chunk_size();
  const unsigned width = geometry_.members();
  b.rows.clear();
  std::vector<PlannedIo> reads;
  for (uint64_t stripe = b.at; stripe < b.end; ++stripe) {
    if (b.needed && !b.needed(stripe)) continue;  // the member holds it already
    const std::vector<ChunkLocation> where = level_->redundancy_set(stripe);
    RebuildBatch::Row row;
    bool mine = false;
    std::byte* base = b.scratch.data() + (stripe - b.at) * width * chunk;
    for (size_t i = 0; i < where.size(); ++i) {
      row.slots.push_back(base + i * chunk);
      if (where[i].member == member) {
        row.mine = i;
        row.member_offset = where[i].member_offset;
        mine = true;
      }
      if (!active(where[i].member)) {
        row.missing.push_back(static_cast<unsigned>(i));
      } else {
        reads.push_back({where[i].member, data_offset_ + where[i].member_offset, row.slots[i],
                         chunk, static_cast<uint32_t>(stripe - b.at)});
      }
    }
    if (mine) b.rows.push_back(std::move(row));  // RAID10 keeps some rows off the member
  }
  b.read = submit_ios_async(members_.all(), MemberOp::read, std::move(reads));
}

// Waits for the batch's reads and rebuilds the member's chunk of each row; the writes that
// put them on the member. A source that failed to read is taken out of service and the
// batch read again from what is left. (The stripes are locked throughout, so what a source
// returned before another failed is still current.)
Result<std::vector<PlannedIo>> Volume::rebuild_rows(unsigned member, RebuildBatch& b) {
  const uint64_t chunk = geometry_.chunk_size();
  for (;;) {
    const std::vector<FailedIo> failed_reads = b.read.get();
    if (failed_reads.empty()) break;
    for (const FailedIo& f : failed_reads) {
      members_.fail(f.member, Error{f.error, fmt::format("read failed during a rebuild: {}",
                                                         std::strerror(f.error))});
    }
    if (failed()) return fail(EIO, "too many members failed");
    read_rows(member, b);  // again, with fewer sources
  }
  std::vector<PlannedIo> writes;
  for (const RebuildBatch::Row& row : b.rows) {
    if (auto r = level_->rebuild(row.slots, row.missing, chunk); !r) return fail(r.error());
    writes.push_back({member, data_offset_ + row.member_offset, row.slots[row.mine], chunk, 0});
  }
  return writes;
}

}  // namespace stripefs
