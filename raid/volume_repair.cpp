// Checking and rebuilding stripes under their locks, so user I/O goes on beside: resync after
// a crash (check_stripes with repair, a stripe at a time), and rebuilding a member that was
// away or onto a new device (rebuild_member, in batches of stripes). Replace and scrub belong
// here too.
#include <algorithm>
#include <cstring>
#include <optional>

#include "raid/aligned_buffer.hpp"
#include "raid/io_batch.hpp"
#include "raid/volume.hpp"
#include "raid/wait.hpp"

namespace stripefs {

uint64_t Volume::rebuild_batch() const {
  return std::max<uint64_t>(1, kRebuildBatchBytes / geometry_.chunk_size());
}

// In batches of stripes, each under its stripes' locks (taken in ascending order, as writes
// take theirs): md's recovery reads whole runs of each source member, not a chunk at a time,
// so a rebuild goes at the members' streaming speed.
Result<void> Volume::rebuild_member(unsigned member, uint64_t first, uint64_t count,
                                    bool* target_failed, const NeededStripes& needed,
                                    uint64_t* rebuilt) {
  if (member >= members_.size() || members_[member] == nullptr || active(member)) {
    return fail(EINVAL, "member {} is not held out for a rebuild", member);
  }
  const bool recovering = members_.recovering(member);
  const uint64_t last = std::min(first + count, geometry_.stripes());
  std::lock_guard scratch_lock(rebuild_mutex_);
  const uint64_t batch = rebuild_batch();
  const uint64_t scratch = batch * geometry_.members() * geometry_.chunk_size();
  if (rebuild_scratch_.size() < scratch) rebuild_scratch_ = AlignedBuffer(scratch);
  for (uint64_t at = first; at < last; at += batch) {
    const uint64_t end = std::min(at + batch, last);
    for (uint64_t stripe = at; stripe < end; ++stripe) locks_.lock(stripe);
    uint64_t rows = 0;
    Result<void> done =
        rebuild_rows(member, at, end, rebuild_scratch_.span(), needed ? needed() : nullptr, rows);
    if (rebuilt != nullptr) *rebuilt += rows;
    if (!done && target_failed != nullptr && done.error().code == kTargetFailed) {
      *target_failed = true;
    }
    // In sync from now on: the next write to these stripes goes to the member too.
    if (done && recovering) members_.set_recovered(member, end);
    for (uint64_t stripe = at; stripe < end; ++stripe) locks_.release(stripe);
    if (!done) {
      return fail(done.error().code == kTargetFailed ? EIO : done.error().code,
                  "rebuilding member {} ({}), stripes {}-{}: {}", member, members_[member]->name(),
                  at, end - 1, done.error().message);
    }
  }
  return {};
}

// The chunks of each stripe's set on members in service are read (one merged request per
// source run), the member's chunk rebuilt from them, and written (merged too). A source that
// fails to read is taken out of service and the batch tried again with what is left; a
// target that fails to write is taken out (when it is being rebuilt in service) and reported
// as kTargetFailed.
Result<void> Volume::rebuild_rows(unsigned member, uint64_t first, uint64_t end,
                                  std::span<std::byte> scratch,
                                  const std::function<bool(uint64_t)>& needed, uint64_t& rebuilt) {
  const uint64_t chunk = geometry_.chunk_size();
  const unsigned width = geometry_.members();
  for (;;) {
    struct Row {
      std::vector<std::byte*> slots;
      std::vector<unsigned> missing;
      size_t mine;
      uint64_t member_offset;
    };
    std::vector<Row> rows;
    std::vector<PlannedIo> reads;
    for (uint64_t stripe = first; stripe < end; ++stripe) {
      if (needed && !needed(stripe)) continue;  // the member holds it already
      const std::vector<ChunkLocation> where = level_->redundancy_set(stripe);
      Row row{};
      bool mine = false;
      std::byte* base = scratch.data() + (stripe - first) * width * chunk;
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
                           chunk, static_cast<uint32_t>(stripe - first)});
        }
      }
      if (mine) rows.push_back(std::move(row));  // RAID10 keeps some rows off the member
    }
    const std::vector<FailedIo> failed_reads = wait_for<std::vector<FailedIo>>([&](auto done) {
      submit_ios(members_.all(), MemberOp::read, std::move(reads), false, std::move(done));
    });
    if (!failed_reads.empty()) {
      for (const FailedIo& f : failed_reads) {
        members_.fail(f.member, Error{f.error, fmt::format("read failed during a rebuild: {}",
                                                           std::strerror(f.error))});
      }
      if (failed()) return fail(EIO, "stripes {}-{}: too many members failed", first, end - 1);
      continue;  // again, with fewer sources
    }
    std::vector<PlannedIo> writes;
    for (const Row& row : rows) {
      if (auto r = level_->rebuild(row.slots, row.missing, chunk); !r) return r;
      writes.push_back({member, data_offset_ + row.member_offset, row.slots[row.mine], chunk, 0});
    }
    const std::vector<FailedIo> failed_writes = wait_for<std::vector<FailedIo>>([&](auto done) {
      submit_ios(members_.all(), MemberOp::write, std::move(writes), false, std::move(done));
    });
    if (!failed_writes.empty()) {
      const Error why{failed_writes[0].error,
                      fmt::format("{}: write failed: {}", members_[member]->name(),
                                  std::strerror(failed_writes[0].error))};
      if (members_.recovering(member)) members_.fail(member, why);
      return fail(kTargetFailed, "{}", why.message);
    }
    rebuilt = rows.size();
    return {};
  }
}

Result<uint64_t> Volume::check_stripes(uint64_t first, uint64_t count, bool repair) {
  if (missing_members() > 0) {
    return fail(EAGAIN, "checking stripes needs every member; {} missing", missing_members());
  }
  const uint64_t chunk = geometry_.chunk_size();
  AlignedBuffer rows(uint64_t{geometry_.members()} * chunk), expected(2 * chunk);
  uint64_t inconsistent = 0;
  const uint64_t last = std::min(first + count, geometry_.stripes());
  for (uint64_t stripe = first; stripe < last; ++stripe) {
    // Under the stripe's lock: a concurrent write cannot change data and parity meanwhile.
    locks_.lock(stripe);
    auto bad = check_stripe(stripe, repair, rows.span(), expected.span());
    locks_.release(stripe);
    if (!bad) return fail(bad.error());
    inconsistent += *bad ? 1 : 0;
  }
  return inconsistent;
}

Result<bool> Volume::check_stripe(uint64_t stripe, bool repair, std::span<std::byte> rows,
                                  std::span<std::byte> expected) {
  const uint64_t chunk = geometry_.chunk_size();
  const std::vector<ChunkLocation> where = level_->redundancy_set(stripe);
  if (where.empty()) return false;  // nothing to compare (RAID0)
  std::vector<std::byte*> slots;
  for (size_t i = 0; i < where.size(); ++i) {
    std::byte* at = rows.data() + i * chunk;
    slots.push_back(at);
    if (auto r = member_read(*members_[where[i].member], data_offset_ + where[i].member_offset,
                             {at, chunk});
        !r) {
      return fail(r.error());
    }
  }
  const auto fixes = level_->disagreements(slots, expected, chunk);
  if (repair) {
    for (auto [slot, contents] : fixes) {
      if (auto r = member_write(*members_[where[slot].member],
                                data_offset_ + where[slot].member_offset, {contents, chunk});
          !r) {
        return fail(r.error());
      }
    }
  }
  return !fixes.empty();
}

}  // namespace stripefs
