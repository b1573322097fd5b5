// Scrub: every stripe's redundancy checked under its lock, beside user I/O, and bad chunks
// rewritten only when they can be named. Resync (volume_repair.cpp) trusts the data and
// rewrites parity; a scrub never does, since on RAID5 that would turn good parity into a
// copy of bad data.
//
// Naming works a block-sized row at a time, by one rule for every level: the fewest chunks
// that, left out and rebuilt from the others, give a row that agrees with itself and whose
// data passes its checks (ScrubBatch). Without checks this is RAID6's syndrome decoding and
// the odd copy out of three; with them it also names the bad data chunk of a RAID5 stripe or
// of two copies, P when all the data passes, and a data chunk and P bad together on RAID6.
// Two different answers that fit equally well name nothing.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <future>
#include <system_error>
#include <thread>

#include "raid/aligned_buffer.hpp"
#include "raid/cpus.hpp"
#include "raid/io_batch.hpp"
#include "raid/log.hpp"
#include "raid/volume.hpp"

namespace stripefs {

namespace {

constexpr uint64_t kRowBytes = 4096;  // rows are named bad one by one (a filesystem block)

// Every way of choosing `k` of `n` slots (in increasing order): calls f(chosen).
template <class F>
void for_each_choice(unsigned n, unsigned k, F&& f, std::vector<unsigned>& chosen,
                     unsigned start = 0) {
  if (chosen.size() == k) {
    f(chosen);
    return;
  }
  for (unsigned x = start; x < n; ++x) {
    chosen.push_back(x);
    for_each_choice(n, k, f, chosen, x + 1);
    chosen.pop_back();
  }
}

// What the scrub of one stripe found.
struct Findings {
  bool mismatched = false;         // redundancy disagreed, or a block failed its check
  uint64_t unresolved_rows = 0;    // rows in which nothing could be named
  uint64_t first_unresolved = 0;   // ... the first one's index
  std::vector<uint64_t> bad_rows;  // per slot: rows named bad (fixed in the slot's buffer)
  uint64_t verified = 0, failed = 0;
};

// Judges a stripe read into `slots` (chunk bytes each): names bad rows and puts what they
// should hold in their place.
class StripeJudge {
 public:
  StripeJudge(const Level& level, const Geometry& g, const ScrubBatch* check, uint64_t row,
              std::span<std::byte> scratch)
      : level_(level), g_(g), check_(check), row_(row), scratch_(scratch) {}

  Findings judge(uint64_t stripe, std::span<std::byte* const> slots) {
    const auto n = static_cast<unsigned>(slots.size());
    const uint64_t chunk = g_.chunk_size(), rows = chunk / row_;
    Findings f;
    f.bad_rows.assign(n, 0);
    std::vector<bool> row_fails(rows, false);
    if (check_ != nullptr) {
      for (unsigned i = 0; i < n; ++i) {
        if (!holds_data(i)) continue;
        for (uint64_t r = 0; r < rows; ++r) {
          const ScrubBatch::Verdict v = verdict(stripe, i, r, slots[i] + r * row_);
          if (v == ScrubBatch::Verdict::unknown) continue;
          ++f.verified;
          if (v == ScrubBatch::Verdict::bad) {
            ++f.failed;
            row_fails[r] = true;
          }
        }
      }
    }
    if (f.failed == 0 && level_.consistent(slots, scratch_, chunk)) return f;
    f.mismatched = true;
    std::vector<std::byte*> row_slots(n);
    for (uint64_t r = 0; r < rows; ++r) {
      for (unsigned i = 0; i < n; ++i) row_slots[i] = slots[i] + r * row_;
      if (!row_fails[r] && level_.consistent(row_slots, scratch_, row_)) continue;
      if (!name_bad(stripe, r, row_slots)) {
        if (f.unresolved_rows++ == 0) f.first_unresolved = r;
        continue;
      }
      for (unsigned i = 0; i < n; ++i) {
        const std::byte* should = work_.data() + i * row_;
        if (std::memcmp(row_slots[i], should, row_) == 0) continue;
        ++f.bad_rows[i];
        std::memcpy(row_slots[i], should, row_);
      }
    }
    return f;
  }

  bool holds_data(unsigned slot) const { return !g_.has_parity() || slot < g_.data_chunks(); }
  // The volume byte slot `slot`'s row `r` of `stripe` holds (a data slot).
  uint64_t volume_offset(uint64_t stripe, unsigned slot, uint64_t r) const {
    const uint64_t chunk_index = g_.has_parity() ? slot : 0;
    return stripe * g_.stripe_data_size() + chunk_index * g_.chunk_size() + r * row_;
  }

 private:
  ScrubBatch::Verdict verdict(uint64_t stripe, unsigned slot, uint64_t r,
                              const std::byte* bytes) const {
    return check_->check(volume_offset(stripe, slot, r), {bytes, row_});
  }

  // Whether the row agrees with itself and none of its data fails its check.
  bool passes(uint64_t stripe, uint64_t r, std::span<std::byte* const> row_slots) const {
    if (!level_.consistent(row_slots, scratch_, row_)) return false;
    if (check_ == nullptr) return true;
    for (unsigned i = 0; i < row_slots.size(); ++i) {
      if (holds_data(i) && verdict(stripe, i, r, row_slots[i]) == ScrubBatch::Verdict::bad) {
        return false;
      }
    }
    return true;
  }

  // The row as it should be, into work_: the one answer found by leaving out the fewest
  // slots. False when none fits or two differ.
  bool name_bad(uint64_t stripe, uint64_t r, std::span<std::byte* const> row_slots) {
    const auto n = static_cast<unsigned>(row_slots.size());
    const unsigned most = g_.has_parity() ? g_.parity_chunks() : n - 1;
    if (work_.size() < n * row_) {
      work_ = AlignedBuffer(n * row_);
      trial_ = AlignedBuffer(n * row_);
    }
    std::vector<std::byte*> trial_slots(n);
    for (unsigned i = 0; i < n; ++i) trial_slots[i] = trial_.data() + i * row_;
    bool found = false, ambiguous = false;
    for (unsigned k = 1; k <= most && !found; ++k) {
      std::vector<unsigned> chosen;
      for_each_choice(
          n, k,
          [&](const std::vector<unsigned>& missing) {
            if (ambiguous) return;
            for (unsigned i = 0; i < n; ++i) std::memcpy(trial_slots[i], row_slots[i], row_);
            if (!level_.rebuild(trial_slots, missing, row_) || !passes(stripe, r, trial_slots))
              return;
            if (!found) {
              std::memcpy(work_.data(), trial_.data(), n * row_);
              found = true;
            } else if (std::memcmp(work_.data(), trial_.data(), n * row_) != 0) {
              ambiguous = true;
            }
          },
          chosen);
    }
    return found && !ambiguous;
  }

  const Level& level_;
  const Geometry& g_;
  const ScrubBatch* check_;
  const uint64_t row_;
  std::span<std::byte> scratch_;  // two chunks
  AlignedBuffer work_, trial_;    // one row of every slot
};

}  // namespace

void Volume::ScrubCounts::add(const ScrubCounts& more) {
  stripes += more.stripes;
  mismatched += more.mismatched;
  repaired += more.repaired;
  unrepairable += more.unrepairable;
  bad_data += more.bad_data;
  bad_parity += more.bad_parity;
  verified_blocks += more.verified_blocks;
  checksum_failures += more.checksum_failures;
  bad_chunks.resize(std::max(bad_chunks.size(), more.bad_chunks.size()));
  for (size_t m = 0; m < more.bad_chunks.size(); ++m) bad_chunks[m] += more.bad_chunks[m];
}

uint64_t Volume::scrub_batch() const {
  return std::max<uint64_t>(1, kScrubBatchBytes / geometry_.chunk_size());
}

uint64_t Volume::scrub_inline_batch() const {
  return std::clamp<uint64_t>(kScrubInlineBatchBytes / geometry_.chunk_size(), 1, scrub_batch());
}

unsigned Volume::scrub_depth() const {
  const uint64_t batch_bytes = scrub_batch() * geometry_.chunk_size();
  return static_cast<unsigned>(
      std::clamp<uint64_t>(kScrubInFlightBytes / batch_bytes, 2, kMaxScrubDepth));
}

unsigned Volume::scrub_workers(uint64_t batches) const {
  const unsigned wanted =
      scrub_workers_ != 0 ? scrub_workers_ : std::min(usable_cpus(), kMaxScrubWorkers);
  return static_cast<unsigned>(std::clamp<uint64_t>(batches, 1, std::max(1u, wanted)));
}

Result<void> Volume::scrub_stripes(uint64_t first, uint64_t count, bool repair, ScrubCounts& counts,
                                   const ScrubBatch* check, ScrubBuffers* kept) {
  if (missing_members() > 0) {
    return fail(EAGAIN, "a scrub needs every member; {} missing", missing_members());
  }
  const uint64_t chunk = geometry_.chunk_size();
  const unsigned width = geometry_.members();
  const uint64_t row = check != nullptr ? check->block_size() : kRowBytes;
  if (row == 0 || chunk % row != 0 || row % sector_ != 0) {
    return fail(EINVAL, "scrub: checks of {} bytes do not divide {}-byte chunks into sectors", row,
                chunk);
  }
  counts.bad_chunks.resize(width, 0);
  if (geometry_.level() == RaidLevel::raid0) return {};  // nothing to check against
  // A batch of stripes at a time, under their locks: one read per member for the range they
  // occupy on it (every member at once; cut at the device's max_io, as every Volume request
  // is), then each stripe judged from the buffers. Workers (the calling thread and
  // scrub_workers() - 1 more) take batches in turn, in order; each judges its own, so the
  // judging, and the copies of members driven inline, use every CPU allowed. A read that
  // completed inside its submission (a member driven inline) is judged at once, while its
  // bytes are in the cache; one still in flight has the worker's next batches' reads
  // started behind it, up to `depth` in flight per worker.
  const uint64_t last = std::min(first + count, geometry_.stripes());
  const uint64_t batch = scrub_batch(), inline_batch = scrub_inline_batch();
  const uint64_t batch_count = last > first ? (last - first + batch - 1) / batch : 0;
  const unsigned workers = scrub_workers(batch_count);
  const unsigned depth = std::max(1u, scrub_depth() / workers);
  struct Batch {
    uint64_t from = 0, to = 0, begin = 0;
    AlignedBuffer* buffers = nullptr;         // one per member
    std::future<std::vector<FailedIo>> read;  // cut to each member's limits
    Result<void> status;
  };
  ScrubBuffers own;
  ScrubBuffers& buffers = kept != nullptr ? *kept : own;
  // A batch's range on a member may start and end inside a chunk.
  const uint64_t buffer_bytes = (batch + 2) * chunk;
  const size_t reads = size_t{workers} * depth * width;
  if (buffers.reads.size() < reads || buffers.reads.front().size() != buffer_bytes) {
    buffers.reads.clear();
    for (size_t i = 0; i < reads; ++i) buffers.reads.emplace_back(buffer_bytes);
    ++buffers.allocations;
  }
  if (buffers.scratch.size() < workers || buffers.scratch.front().size() != 2 * chunk) {
    buffers.scratch.clear();
    for (unsigned w = 0; w < workers; ++w) buffers.scratch.emplace_back(2 * chunk);
  }
  // What one worker judged: counted and logged.
  const auto count_findings = [&](const StripeJudge& judge, ScrubCounts& c, uint64_t stripe,
                                  const std::vector<ChunkLocation>& where, const Findings& found,
                                  bool rewritten) {
    ++c.stripes;
    c.verified_blocks += found.verified;
    c.checksum_failures += found.failed;
    if (!found.mismatched) return;
    ++c.mismatched;
    if (rewritten) ++c.repaired;
    for (size_t i = 0; i < found.bad_rows.size(); ++i) {
      if (found.bad_rows[i] == 0) continue;
      const ChunkLocation& bad = where[i];
      Member& device = *members_[bad.member];
      uint64_t errors = 0;
      for (uint64_t e = 0; e < found.bad_rows[i]; ++e) errors = device.count_checksum_error();
      ++c.bad_chunks[bad.member];
      const bool data = judge.holds_data(static_cast<unsigned>(i));
      ++(data ? c.bad_data : c.bad_parity);
      raid_log().warn(
          "scrub: stripe {}: member {} ({}), data-area byte {}: {} block(s) of its {} chunk "
          "wrong{} ({} checksum errors on the device)",
          stripe, bad.member, device.name(), bad.member_offset, found.bad_rows[i],
          data ? "data" : (i == geometry_.data_chunks() ? "P" : "Q"),
          repair ? "; rewritten from the others" : "", errors);
    }
    if (found.unresolved_rows > 0) {
      ++c.unrepairable;
      raid_log().error(
          "scrub: stripe {}: {} block row(s) from volume byte {} on are inconsistent{} and no "
          "chunk can be named bad; left as they are",
          stripe, found.unresolved_rows, judge.volume_offset(stripe, 0, found.first_unresolved),
          found.failed > 0 ? " or fail their checksums" : "");
    }
  };
  // Locks the batch from `from` and starts its reads.
  const auto start = [&](Batch& b, uint64_t from, uint64_t stripes) {
    b.from = from;
    b.to = std::min(from + stripes, last);
    b.read = {};
    b.status = {};
    for (uint64_t stripe = b.from; stripe < b.to; ++stripe) locks_.lock(stripe);
    // A member that left service meanwhile (failed, or being rebuilt) has nothing to check.
    for (unsigned m = 0; m < width && b.status; ++m) {
      if (!active(m)) {
        b.status = fail(EAGAIN, "member {} is out of service; a scrub needs every member", m);
      }
    }
    if (!b.status) return;
    const auto [begin, end] = member_range(b.from, b.to - 1);
    b.begin = begin;
    std::vector<PlannedIo> planned;
    for (unsigned m = 0; m < width; ++m) {
      planned.push_back({m, data_offset_ + begin, b.buffers[m].data(), end - begin, m});
    }
    // Not counted in stats_ (nor are the repairs' writes): those are the user's member I/O,
    // by which the array's pacing tells a busy array from an idle one (Array::current_rate),
    // as a rebuild's are not counted either.
    b.read = submit_ios_async(members_.all(), MemberOp::read, std::move(planned));
  };
  // Reads of the batch failed: every chunk of a member that failed is read again alone, and
  // a stripe's chunks that still fail are healed as a read's are (rebuilt together from the
  // rest of the stripe, written back, read back, counted; md's check does so too). All of a
  // stripe's chunks are read again before any is rebuilt: a chunk is never rebuilt from
  // another's buffer that its read left unfilled (or holding an earlier batch's bytes).
  // Unhealable: the scrub's error.
  const auto heal_unreadable = [&](Batch& b, const std::vector<FailedIo>& failed) -> Result<void> {
    std::vector<int> error(width, 0);  // per member: errno of its failed read, 0 if none
    for (const FailedIo& f : failed) {
      if (error[f.member] == 0) error[f.member] = f.error;
    }
    const auto why = [&](unsigned m, uint64_t offset) {
      return fmt::format("read failed at member byte {}: {}", offset, std::strerror(error[m]));
    };
    for (uint64_t stripe = b.from; stripe < b.to; ++stripe) {
      const std::vector<ChunkLocation> where = level_->redundancy_set(stripe);
      std::vector<std::byte*> slots;
      for (const ChunkLocation& at : where) {
        slots.push_back(b.buffers[at.member].data() + (at.member_offset - b.begin));
      }
      std::vector<unsigned> unreadable;
      for (size_t i = 0; i < where.size(); ++i) {
        const unsigned m = where[i].member;
        if (error[m] == 0) continue;
        const uint64_t offset = data_offset_ + where[i].member_offset;
        if (member_read(*members_[m], offset, {slots[i], chunk})) continue;
        if (!healable(m)) return fail(error[m], "{}: {}", members_[m]->name(), why(m, offset));
        unreadable.push_back(static_cast<unsigned>(i));
      }
      if (unreadable.empty()) continue;
      // What the level rebuilds: its parity chunks, or all copies but one (as check_stripes).
      const size_t redundancy =
          geometry_.has_parity() ? geometry_.parity_chunks() : where.size() - 1;
      if (unreadable.size() > redundancy) {
        const unsigned m = where[unreadable.front()].member;
        return fail(error[m], "stripe {}: {} of its chunks cannot be read, too many to rebuild",
                    stripe, unreadable.size());
      }
      if (auto r = level_->rebuild(slots, unreadable, chunk); !r) return fail(r.error());
      AlignedBuffer back(chunk);
      for (const unsigned i : unreadable) {
        const unsigned m = where[i].member;
        const uint64_t offset = data_offset_ + where[i].member_offset;
        if (!rewrite_unreadable(m, offset, {slots[i], chunk}, back.span(), why(m, offset))) {
          return fail(error[m], "{}: {}; it is out of service", members_[m]->name(),
                      why(m, offset));
        }
      }
    }
    return {};
  };
  // The workers share the next batch to take and the first failure; a failure stops them
  // all: each stops judging (and repairing) at the next stripe, and lets go of the batches
  // it has in flight unjudged.
  std::atomic<uint64_t> next_stripe{first};
  std::atomic<bool> failed{false};
  Result<void> failure;
  // Waits for its reads, judges (and repairs) its stripes, and unlocks them.
  const auto finish = [&](StripeJudge& judge, ScrubCounts& c, Batch& b,
                          bool judge_it) -> Result<void> {
    Result<void> status = b.status;
    if (b.read.valid()) {
      const std::vector<FailedIo> unread = b.read.get();
      if (!unread.empty() && status && judge_it) status = heal_unreadable(b, unread);
    }
    for (uint64_t stripe = b.from;
         stripe < b.to && status && judge_it && !failed.load(std::memory_order_relaxed); ++stripe) {
      const std::vector<ChunkLocation> where = level_->redundancy_set(stripe);
      std::vector<std::byte*> slots;
      for (const ChunkLocation& at : where) {
        slots.push_back(b.buffers[at.member].data() + (at.member_offset - b.begin));
      }
      const Findings found = judge.judge(stripe, slots);
      bool rewritten = false;
      for (size_t i = 0; i < found.bad_rows.size() && status && repair; ++i) {
        if (found.bad_rows[i] == 0) continue;
        status = member_write(*members_[where[i].member], data_offset_ + where[i].member_offset,
                              {slots[i], chunk});
        rewritten = true;
      }
      if (!status) {
        status = fail(status.error().code, "stripe {}: {}", stripe, status.error().message);
        break;
      }
      count_findings(judge, c, stripe, where, found, rewritten);
    }
    for (uint64_t stripe = b.from; stripe < b.to; ++stripe) locks_.release(stripe);
    return status;
  };
  std::vector<ScrubCounts> found(workers);
  const auto work = [&](unsigned w) {
    StripeJudge judge(*level_, geometry_, check, row, buffers.scratch[w].span());
    ScrubCounts& c = found[w];
    c.bad_chunks.assign(width, 0);
    Batch batches[kMaxScrubDepth];
    for (unsigned i = 0; i < depth; ++i) {
      batches[i].buffers = &buffers.reads[(size_t{w} * depth + i) * width];
    }
    // Batches finished to started - 1 are in flight, in order; slot i % depth holds batch i.
    // Once a read has completed inside its submission (the member was driven inline: the
    // copy ran on this thread), the batches taken are smaller, to be judged from the cache.
    uint64_t started = 0, finished = 0, stripes = batch;
    for (;;) {
      while (started < finished + depth && !failed.load(std::memory_order_relaxed)) {
        const uint64_t from = next_stripe.fetch_add(stripes, std::memory_order_relaxed);
        if (from >= last) break;
        Batch& b = batches[started++ % depth];
        start(b, from, stripes);
        // Read already, or refused: judged now, before more is read over it.
        if (!b.read.valid() ||
            b.read.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
          if (b.read.valid()) stripes = inline_batch;
          break;
        }
      }
      if (finished == started) return;
      const bool judge_it = !failed.load(std::memory_order_relaxed);
      Result<void> status = finish(judge, c, batches[finished++ % depth], judge_it);
      // Only the first to fail writes `failure`, read after the workers are joined.
      if (!status && judge_it && !failed.exchange(true)) failure = std::move(status);
    }
  };
  {
    std::vector<std::jthread> helpers;
    try {
      for (unsigned w = 1; w < workers; ++w) helpers.emplace_back(work, w);
    } catch (const std::system_error& e) {  // fewer threads: the batches are shared anyway
      raid_log().warn("scrub: {} of {} workers started: {}", helpers.size() + 1, workers, e.what());
    }
    work(0);
  }
  for (const ScrubCounts& c : found) counts.add(c);
  if (failed.load()) return fail(failure.error().code, "scrub: {}", failure.error().message);
  return {};
}

}  // namespace stripefs
