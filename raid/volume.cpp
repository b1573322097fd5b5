#include "raid/volume.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

#include "raid/aligned_buffer.hpp"
#include "raid/io_batch.hpp"
#include "raid/log.hpp"
#include "raid/parity.hpp"
#include "raid/wait.hpp"

namespace stripefs {

namespace {

// A run of caller data inside one chunk.
struct Segment {
  uint64_t chunk_offset;
  uint64_t length;
  std::byte* data;
};

// Segments covering [lo, hi) exactly: `segments` (sorted, non-overlapping) with the gaps
// between them filled from `scratch`, which holds [lo, hi).
std::vector<Segment> fill_gaps(const std::vector<Segment>& segments, uint64_t lo, uint64_t hi,
                               std::byte* scratch, bool include_segments) {
  std::vector<Segment> out;
  uint64_t pos = lo;
  for (const Segment& s : segments) {
    if (s.chunk_offset > pos) out.push_back({pos, s.chunk_offset - pos, scratch + (pos - lo)});
    if (include_segments) out.push_back(s);
    pos = s.chunk_offset + s.length;
  }
  if (pos < hi) out.push_back({pos, hi - pos, scratch + (pos - lo)});
  return out;
}

// P (and Q) over [lo, hi) of data chunks given as segment lists that each cover [lo, hi).
// Parity goes to p/q, which hold [lo, hi). No data is copied: isa-l reads the segments
// where they are, cut where any chunk's segments change.
void generate_segmented(const std::vector<std::vector<Segment>>& sources, uint64_t lo, uint64_t hi,
                        std::byte* p, std::byte* q) {
  const size_t k = sources.size();
  std::vector<size_t> index(k, 0);
  std::vector<std::byte*> pointers(k);
  uint64_t pos = lo;
  while (pos < hi) {
    uint64_t next = hi;
    for (size_t d = 0; d < k; ++d) {
      const Segment& s = sources[d][index[d]];
      pointers[d] = s.data + (pos - s.chunk_offset);
      next = std::min(next, s.chunk_offset + s.length);
    }
    parity::generate(pointers, p + (pos - lo), q ? q + (pos - lo) : nullptr, next - pos);
    pos = next;
    for (size_t d = 0; d < k; ++d) {
      const Segment& s = sources[d][index[d]];
      if (s.chunk_offset + s.length == pos) ++index[d];
    }
  }
}

}  // namespace

struct Volume::StripeWrite {
  uint64_t stripe = 0;
  std::vector<std::vector<Segment>> data;  // new data per data index, sorted
  uint64_t bytes = 0;
  uint64_t lo = 0, hi = 0;  // chunk-relative rows the write touches
  bool full = false;
  uint64_t planned_missing = 0;  // partial stripe: members missing when planned
  PooledBuffer parity;           // full stripe: P then Q
  AlignedBuffer buffer;          // partial stripe: one scratch slot per chunk
};

struct Volume::WriteJob {
  std::vector<StripeWrite> stripes;
  Callback done;
  size_t locked = 0;
  std::atomic<size_t> remaining{0};
  std::mutex mutex;
  std::optional<Error> error;
};

struct Volume::ReadJob {
  Callback done;
  std::atomic<size_t> remaining{1};  // one for the submitter until everything is issued
  std::mutex mutex;
  std::optional<Error> error;
};

Result<std::unique_ptr<Volume>> Volume::create(Geometry geometry, std::vector<Member*> members,
                                               uint64_t data_offset) {
  if (members.size() != geometry.members()) {
    return fail(EINVAL, "{} members given for a {}-member array", members.size(),
                geometry.members());
  }
  uint32_t sector = 512;
  for (Member* m : members) {
    if (m == nullptr) continue;
    sector = std::max(sector, m->limits().logical_block);
    if (m->size() < data_offset || m->size() - data_offset < geometry.member_data_size()) {
      return fail(ENOSPC, "member {}: {} bytes, the array needs {} from byte {}", m->name(),
                  m->size(), geometry.member_data_size(), data_offset);
    }
  }
  if (data_offset % 4096 != 0) return fail(EINVAL, "data offset {} not 4 KiB aligned", data_offset);
  std::unique_ptr<Volume> volume(
      new Volume(std::move(geometry), std::move(members), data_offset, sector));
  if (volume->failed()) {
    return fail(ENODEV, "{} of {} members missing; {} tolerates {}", volume->missing_members(),
                volume->geometry_.members(), to_string(volume->geometry_.level()),
                volume->geometry_.redundancy());
  }
  return volume;
}

// Enough parity buffers in the (registrable) arena for many stripes in flight, within a
// 32 MiB budget.
size_t Volume::parity_arena_buffers(const Geometry& geometry) {
  const size_t buffer = size_t{geometry.parity_chunks()} * geometry.chunk_size();
  if (buffer == 0) return 0;
  return std::clamp<size_t>((32u << 20) / buffer, 8, 256);
}

Volume::Volume(Geometry geometry, std::vector<Member*> members, uint64_t data_offset,
               uint32_t sector)
    : geometry_(std::move(geometry)),
      level_(Level::create(geometry_)),
      members_(std::move(members)),
      data_offset_(data_offset),
      sector_(sector),
      parity_pool_(size_t{geometry_.parity_chunks()} * geometry_.chunk_size(),
                   parity_arena_buffers(geometry_), 64) {
  for (size_t i = 0; i < members_.size(); ++i) active_[i].store(members_[i] != nullptr);
}

unsigned Volume::missing_members() const {
  unsigned missing = 0;
  for (unsigned i = 0; i < geometry_.members(); ++i) missing += active(i) ? 0 : 1;
  return missing;
}

bool Volume::failed() const {
  return !level_->survives(is_active());
}

void Volume::fail_member(unsigned member, const Error& why) {
  FailureListener listener;
  {
    // The failure counts as unrecorded before any write can plan around the member: a
    // write that skips it is then held until the record is durable.
    std::lock_guard lock(listener_mutex_);
    if (!active_[member].load()) return;
    listener = listener_;
    if (listener) unrecorded_ |= uint64_t{1} << member;
    active_[member].store(false, std::memory_order_release);
  }
  raid_log().error("member {} ({}) failed: {}", member,
                   members_[member] ? members_[member]->name() : "missing", why.message);
  if (listener) listener(member, why);
}

void Volume::hold_out(unsigned member) {
  active_[member].store(false, std::memory_order_release);
}

void Volume::restore_member(unsigned member) {
  if (members_[member] != nullptr) active_[member].store(true, std::memory_order_release);
}

Result<void> Volume::rebuild_member(unsigned member, uint64_t first, uint64_t count,
                                    bool* target_failed) {
  Member* target = members_.at(member);
  if (target == nullptr || active(member)) {
    return fail(EINVAL, "member {} is not held out for a rebuild", member);
  }
  const uint64_t chunk = geometry_.chunk_size();
  AlignedBuffer rows(uint64_t{geometry_.members()} * chunk);
  const uint64_t last = std::min(first + count, geometry_.stripes());
  for (uint64_t stripe = first; stripe < last; ++stripe) {
    const std::vector<ChunkLocation> where = level_->redundancy_set(stripe);
    std::vector<std::byte*> slots;
    std::vector<unsigned> missing;
    std::optional<size_t> mine;
    for (size_t i = 0; i < where.size(); ++i) {
      slots.push_back(rows.data() + i * chunk);
      if (where[i].member == member) mine = i;
      if (!active(where[i].member)) missing.push_back(static_cast<unsigned>(i));
    }
    if (!mine) continue;  // this stripe keeps nothing on the member (RAID10)
    locks_.lock(stripe);
    Result<void> done;
    for (size_t i = 0; i < where.size() && done; ++i) {
      if (!active(where[i].member)) continue;
      done = member_read(*members_[where[i].member], data_offset_ + where[i].member_offset,
                         {slots[i], chunk});
    }
    if (done) done = level_->rebuild(slots, missing, chunk);
    if (done) {
      done =
          member_write(*target, data_offset_ + where[*mine].member_offset, {slots[*mine], chunk});
      if (!done && target_failed != nullptr) *target_failed = true;
    }
    locks_.release(stripe);
    if (!done) {
      return fail(done.error().code, "rebuilding member {} ({}), stripe {}: {}", member,
                  target->name(), stripe, done.error().message);
    }
  }
  return {};
}

void Volume::failure_recorded(unsigned member) {
  std::vector<std::function<void()>> ready;
  {
    std::lock_guard lock(listener_mutex_);
    unrecorded_ &= ~(uint64_t{1} << member);
    if (unrecorded_ == 0) ready = std::exchange(held_, {});
  }
  for (auto& then : ready) then();
}

void Volume::after_failures_recorded(std::function<void()> then) {
  {
    std::lock_guard lock(listener_mutex_);
    if (unrecorded_ != 0) {
      held_.push_back(std::move(then));
      return;
    }
  }
  then();
}

void Volume::set_failure_listener(FailureListener listener) {
  std::lock_guard lock(listener_mutex_);
  listener_ = std::move(listener);
}

void Volume::note_failures(const std::vector<FailedIo>& failures) {
  for (const FailedIo& f : failures) {
    fail_member(f.member, Error{f.error, fmt::format("I/O error: {}", std::strerror(f.error))});
  }
}

VolumeStats Volume::stats() const {
  VolumeStats s;
  s.full_stripe_writes = stats_.full_stripe_writes.load();
  s.full_stripe_bytes = stats_.full_stripe_bytes.load();
  s.partial_stripe_writes = stats_.partial_stripe_writes.load();
  s.partial_stripe_bytes = stats_.partial_stripe_bytes.load();
  s.rmw_writes = stats_.rmw_writes.load();
  s.rcw_writes = stats_.rcw_writes.load();
  s.degraded_writes = stats_.degraded_writes.load();
  s.prereads = stats_.prereads.load();
  s.preread_bytes = stats_.preread_bytes.load();
  s.degraded_reads = stats_.degraded_reads.load();
  s.member_write_ios = stats_.member_write_ios.load();
  s.member_read_ios = stats_.member_read_ios.load();
  s.direct_reads = stats_.direct_reads.load();
  return s;
}

Result<void> Volume::check_pieces(const std::vector<VolumePiece>& pieces) const {
  for (const VolumePiece& p : pieces) {
    if (p.offset % sector_ || p.data.size() % sector_ ||
        reinterpret_cast<uintptr_t>(p.data.data()) % sector_) {
      return fail(EINVAL, "volume I/O at {} of {} bytes is not aligned to {}-byte sectors",
                  p.offset, p.data.size(), sector_);
    }
    if (p.offset > size() || p.data.size() > size() - p.offset) {
      return fail(EINVAL, "volume I/O at {} of {} bytes runs past the end ({} bytes)", p.offset,
                  p.data.size(), size());
    }
  }
  return {};
}

// ---------------------------------------------------------------------------------------
// Write path

void Volume::write(std::vector<VolumePiece> pieces, Callback done) {
  if (auto ok = check_pieces(pieces); !ok) {
    done(fail(ok.error()));
    return;
  }
  // Overlapping pieces would count bytes twice (a false full stripe, a delta applied twice)
  // and race each other to the members: refused.
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  for (const VolumePiece& p : pieces) spans.emplace_back(p.offset, p.offset + p.data.size());
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) {
    if (spans[i].first < spans[i - 1].second) {
      done(fail(EINVAL, "write pieces overlap at volume byte {}", spans[i].first));
      return;
    }
  }
  auto job = std::make_shared<WriteJob>();
  job->done = std::move(done);
  const uint64_t stripe_size = geometry_.stripe_data_size();
  const uint64_t chunk = geometry_.chunk_size();
  std::map<uint64_t, size_t> by_stripe;
  for (const VolumePiece& piece : pieces) {
    uint64_t offset = piece.offset;
    std::byte* data = piece.data.data();
    uint64_t remaining = piece.data.size();
    while (remaining > 0) {
      const uint64_t stripe = offset / stripe_size;
      const uint64_t within = offset % stripe_size;
      const unsigned index = static_cast<unsigned>(within / chunk);
      const uint64_t chunk_offset = within % chunk;
      const uint64_t length = std::min(remaining, chunk - chunk_offset);
      auto [it, inserted] = by_stripe.try_emplace(stripe, job->stripes.size());
      if (inserted) {
        job->stripes.emplace_back();
        job->stripes.back().stripe = stripe;
        job->stripes.back().data.resize(geometry_.data_chunks());
      }
      StripeWrite& s = job->stripes[it->second];
      s.data[index].push_back({chunk_offset, length, data});
      s.bytes += length;
      offset += length;
      data += length;
      remaining -= length;
    }
  }
  for (StripeWrite& s : job->stripes) {
    s.full = s.bytes == stripe_size;
    s.lo = chunk;
    s.hi = 0;
    for (auto& segments : s.data) {
      std::sort(segments.begin(), segments.end(),
                [](const Segment& a, const Segment& b) { return a.chunk_offset < b.chunk_offset; });
      if (!segments.empty()) {
        s.lo = std::min(s.lo, segments.front().chunk_offset);
        s.hi = std::max(s.hi, segments.back().chunk_offset + segments.back().length);
      }
    }
  }
  // Ascending stripe order: the lock order that keeps concurrent jobs deadlock-free.
  std::sort(job->stripes.begin(), job->stripes.end(),
            [](const StripeWrite& a, const StripeWrite& b) { return a.stripe < b.stripe; });
  if (job->stripes.empty()) {
    job->done({});
    return;
  }
  lock_next(std::move(job));
}

void Volume::lock_next(std::shared_ptr<WriteJob> job) {
  while (job->locked < job->stripes.size()) {
    const uint64_t stripe = job->stripes[job->locked].stripe;
    if (!locks_.acquire(stripe, [this, job] {
          ++job->locked;
          lock_next(job);
        })) {
      return;  // resumes when the stripe is handed over
    }
    ++job->locked;
  }
  start_write(std::move(job));
}

std::pair<uint64_t, uint64_t> Volume::member_range(uint64_t first_stripe,
                                                   uint64_t last_stripe) const {
  const uint64_t chunk = geometry_.chunk_size();
  if (geometry_.level() == RaidLevel::raid10) {
    // near-2: chunk c's copies sit at positions 2c and 2c+1, row = position / members.
    const uint64_t n = geometry_.members();
    return {first_stripe * 2 / n * chunk, ((last_stripe * 2 + 1) / n + 1) * chunk};
  }
  return {first_stripe * chunk, (last_stripe + 1) * chunk};
}

std::pair<uint64_t, uint64_t> Volume::stripes_of(uint64_t begin, uint64_t end) const {
  const uint64_t chunk = geometry_.chunk_size();
  const uint64_t first_row = begin / chunk, last_row = (end - 1) / chunk;
  uint64_t first = first_row, last = last_row;
  if (geometry_.level() == RaidLevel::raid10) {
    const uint64_t n = geometry_.members();
    first = first_row * n / 2;
    last = ((last_row + 1) * n - 1) / 2;
  }
  return {first, std::min(last, geometry_.stripes() - 1)};
}

void Volume::start_write(std::shared_ptr<WriteJob> job) {
  if (intent_ == nullptr) {
    issue_write(std::move(job));
    return;
  }
  // Nothing reaches a member before the bitmap says this range may be inconsistent.
  auto [begin, end] = member_range(job->stripes.front().stripe, job->stripes.back().stripe);
  intent_->begin_write(begin, end, [this, job] { issue_write(job); });
}

void Volume::issue_write(std::shared_ptr<WriteJob> job) {
  std::vector<PlannedIo> ios;
  std::vector<size_t> partial;
  for (size_t i = 0; i < job->stripes.size(); ++i) {
    StripeWrite& s = job->stripes[i];
    if (!geometry_.has_parity()) {
      plan_direct_stripe(s, ios);
      auto& count = s.full ? stats_.full_stripe_writes : stats_.partial_stripe_writes;
      auto& bytes = s.full ? stats_.full_stripe_bytes : stats_.partial_stripe_bytes;
      count.fetch_add(1, std::memory_order_relaxed);
      bytes.fetch_add(s.bytes, std::memory_order_relaxed);
    } else if (s.full) {
      plan_full_stripe(s, ios);
    } else {
      partial.push_back(i);
    }
  }
  if (ios.empty() && partial.empty()) {
    // Every target is gone (RAID0 member, all copies): nothing to wait for.
    job->remaining.store(1);
    stripe_done(job, failed() ? fail(EIO,
                                     "write failed: no surviving member holds volume "
                                     "stripe {}",
                                     job->stripes.front().stripe)
                              : Result<void>{});
    return;
  }
  job->remaining.store(partial.size() + (ios.empty() ? 0 : 1));
  if (!ios.empty()) {
    stats_.member_write_ios.fetch_add(ios.size(), std::memory_order_relaxed);
    auto submit = [this, job, ios = std::move(ios)]() mutable {
      submit_ios(members_, MemberOp::write, std::move(ios), false,
                 [this, job](std::vector<FailedIo> failures) {
                   note_failures(failures);
                   if (failed()) {
                     stripe_done(job, fail(EIO, "write failed: {} members missing, {} tolerates {}",
                                           missing_members(), to_string(geometry_.level()),
                                           geometry_.redundancy()));
                   } else {
                     stripe_done(job, {});
                   }
                 });
    };
    std::vector<uint64_t> full;
    if (stripe_log_ != nullptr) {
      for (const StripeWrite& s : job->stripes) {
        if (s.full) full.push_back(s.stripe);
      }
    }
    if (full.empty()) {
      submit();
    } else {
      stripe_log_->before_bypass(
          std::move(full), [this, job, submit = std::move(submit)](Result<void> ok) mutable {
            if (ok) {
              submit();
            } else {
              stripe_done(job, fail(ok.error().code, "stripe log: {}", ok.error().message));
            }
          });
    }
  }
  for (size_t i : partial) run_partial_stripe(job, i);
}

void Volume::plan_direct_stripe(StripeWrite& s, std::vector<PlannedIo>& ios) {
  const Level::Active live = is_active();
  std::vector<ChunkLocation> targets;
  for (unsigned index = 0; index < geometry_.data_chunks(); ++index) {
    if (s.data[index].empty()) continue;
    targets.clear();
    level_->write_targets(s.stripe, index, live, targets);
    for (const Segment& seg : s.data[index]) {
      for (const ChunkLocation& at : targets) {
        ios.push_back({at.member, data_offset_ + at.member_offset + seg.chunk_offset, seg.data,
                       seg.length, 0});
      }
    }
  }
}

void Volume::plan_full_stripe(StripeWrite& s, std::vector<PlannedIo>& ios) {
  const uint64_t chunk = geometry_.chunk_size();
  const unsigned parities = geometry_.parity_chunks();
  s.parity = parity_pool_.take();
  std::byte* p = s.parity.data();
  std::byte* q = parities == 2 ? p + chunk : nullptr;
  // Parity straight from the caller's buffers, which are then written as they are.
  generate_segmented(s.data, 0, chunk, p, q);
  plan_direct_stripe(s, ios);
  const uint64_t row = data_offset_ + s.stripe * chunk;
  const unsigned pm = geometry_.p_member(s.stripe);
  if (active(pm)) ios.push_back({pm, row, p, chunk, 0});
  if (q != nullptr) {
    const unsigned qm = geometry_.q_member(s.stripe);
    if (active(qm)) ios.push_back({qm, row, q, chunk, 0});
  }
  stats_.full_stripe_writes.fetch_add(1, std::memory_order_relaxed);
  stats_.full_stripe_bytes.fetch_add(s.bytes, std::memory_order_relaxed);
}

// A partial stripe works on the rows [lo, hi) of its chunks, with one scratch slot of that
// size per chunk: data indexes 0..k-1, then P and Q.
void Volume::run_partial_stripe(std::shared_ptr<WriteJob> job, size_t index) {
  StripeWrite& s = job->stripes[index];
  const unsigned k = geometry_.data_chunks();
  const unsigned parities = geometry_.parity_chunks();
  const uint64_t range = s.hi - s.lo;
  const uint64_t row = data_offset_ + s.stripe * geometry_.chunk_size();
  s.buffer = AlignedBuffer((k + parities) * range);
  auto slot = [&](unsigned i) { return s.buffer.data() + i * range; };
  auto member_of = [&](unsigned i) {
    return i < k ? geometry_.locate(s.stripe, i).member
                 : (i == k ? geometry_.p_member(s.stripe) : geometry_.q_member(s.stripe));
  };

  bool degraded = false;
  s.planned_missing = 0;
  for (unsigned i = 0; i < k + parities; ++i) {
    if (!active(member_of(i))) s.planned_missing |= uint64_t{1} << i;
  }
  degraded = s.planned_missing != 0;

  std::vector<PlannedIo> reads;
  bool rmw = false;
  if (degraded) {
    // Read every surviving chunk's rows; the missing ones are rebuilt before writing.
    for (unsigned i = 0; i < k + parities; ++i) {
      if (active(member_of(i))) reads.push_back({member_of(i), row + s.lo, slot(i), range, i});
    }
  } else {
    uint64_t touched_total = 0, untouched_total = 0;
    for (unsigned i = 0; i < k; ++i) {
      uint64_t touched = 0;
      for (const Segment& seg : s.data[i]) touched += seg.length;
      touched_total += touched;
      untouched_total += range - touched;
    }
    const uint64_t rmw_reads = touched_total + parities * range;
    rmw = rmw_reads < untouched_total;
    for (unsigned i = 0; i < k; ++i) {
      if (rmw) {
        for (const Segment& seg : s.data[i]) {
          reads.push_back({member_of(i), row + seg.chunk_offset,
                           slot(i) + (seg.chunk_offset - s.lo), seg.length, i});
        }
      } else {
        for (const Segment& gap : fill_gaps(s.data[i], s.lo, s.hi, slot(i), false)) {
          reads.push_back({member_of(i), row + gap.chunk_offset, gap.data, gap.length, i});
        }
      }
    }
    if (rmw) {
      for (unsigned i = k; i < k + parities; ++i) {
        reads.push_back({member_of(i), row + s.lo, slot(i), range, i});
      }
    }
  }
  uint64_t read_bytes = 0;
  for (const PlannedIo& r : reads) read_bytes += r.length;
  stats_.prereads.fetch_add(reads.size(), std::memory_order_relaxed);
  stats_.preread_bytes.fetch_add(read_bytes, std::memory_order_relaxed);
  stats_.member_read_ios.fetch_add(reads.size(), std::memory_order_relaxed);
  submit_ios(members_, MemberOp::read, std::move(reads), false,
             [this, job, index, rmw](std::vector<FailedIo> failures) {
               if (!failures.empty()) {
                 note_failures(failures);
                 if (failed()) {
                   stripe_done(job, fail(EIO, "stripe {}: too many members failed",
                                         job->stripes[index].stripe));
                 } else {
                   run_partial_stripe(job, index);  // again, now degraded
                 }
                 return;
               }
               finish_partial_stripe(job, index, rmw);
             });
}

void Volume::finish_partial_stripe(std::shared_ptr<WriteJob> job, size_t index, bool rmw) {
  StripeWrite& s = job->stripes[index];
  const unsigned k = geometry_.data_chunks();
  const unsigned parities = geometry_.parity_chunks();
  const uint64_t range = s.hi - s.lo;
  const uint64_t row = data_offset_ + s.stripe * geometry_.chunk_size();
  auto slot = [&](unsigned i) { return s.buffer.data() + i * range; };
  auto member_of = [&](unsigned i) {
    return i < k ? geometry_.locate(s.stripe, i).member
                 : (i == k ? geometry_.p_member(s.stripe) : geometry_.q_member(s.stripe));
  };
  std::byte* p = slot(k);
  std::byte* q = parities == 2 ? slot(k + 1) : nullptr;

  std::vector<unsigned> missing;
  uint64_t missing_now = 0;
  for (unsigned i = 0; i < k + parities; ++i) {
    if (!active(member_of(i))) {
      missing.push_back(i);
      missing_now |= uint64_t{1} << i;
    }
  }
  if (missing_now != s.planned_missing) {
    // A member left while we read: what was read no longer covers what must be rebuilt.
    if (failed()) {
      stripe_done(job, fail(EIO, "stripe {}: too many members failed", s.stripe));
    } else {
      run_partial_stripe(job, index);
    }
    return;
  }
  if (rmw && missing.empty()) {
    // new parity = old parity + (old data - new data), per touched segment.
    for (unsigned i = 0; i < k; ++i) {
      for (const Segment& seg : s.data[i]) {
        std::byte* delta = slot(i) + (seg.chunk_offset - s.lo);
        parity::xor_into(delta, seg.data, seg.length);
        parity::xor_into(p + (seg.chunk_offset - s.lo), delta, seg.length);
        if (q) parity::q_update(i, delta, q + (seg.chunk_offset - s.lo), seg.length);
      }
    }
    stats_.rmw_writes.fetch_add(1, std::memory_order_relaxed);
  } else {
    if (!missing.empty()) {
      std::vector<std::byte*> chunks;
      for (unsigned i = 0; i < k + parities; ++i) chunks.push_back(slot(i));
      if (auto ok = parity::recover(chunks, parities, missing, range); !ok) {
        stripe_done(job, fail(ok.error()));
        return;
      }
      stats_.degraded_writes.fetch_add(1, std::memory_order_relaxed);
    } else {
      stats_.rcw_writes.fetch_add(1, std::memory_order_relaxed);
    }
    std::vector<std::vector<Segment>> sources(k);
    for (unsigned i = 0; i < k; ++i) sources[i] = fill_gaps(s.data[i], s.lo, s.hi, slot(i), true);
    generate_segmented(sources, s.lo, s.hi, p, q);
  }

  std::vector<PlannedIo> writes;
  for (unsigned i = 0; i < k; ++i) {
    if (!active(member_of(i))) continue;
    for (const Segment& seg : s.data[i]) {
      writes.push_back({member_of(i), row + seg.chunk_offset, seg.data, seg.length, i});
    }
  }
  for (unsigned i = k; i < k + parities; ++i) {
    if (active(member_of(i))) writes.push_back({member_of(i), row + s.lo, slot(i), range, i});
  }
  stats_.partial_stripe_writes.fetch_add(1, std::memory_order_relaxed);
  stats_.partial_stripe_bytes.fetch_add(s.bytes, std::memory_order_relaxed);
  stats_.member_write_ios.fetch_add(writes.size(), std::memory_order_relaxed);
  auto write_in_place = [this, job](std::vector<PlannedIo> writes, std::optional<uint64_t> token) {
    submit_ios(members_, MemberOp::write, std::move(writes), false,
               [this, job, token](std::vector<FailedIo> failures) {
                 note_failures(failures);
                 if (token) stripe_log_->written(*token);
                 if (failed()) {
                   stripe_done(job,
                               fail(EIO, "write failed: {} members missing", missing_members()));
                 } else {
                   stripe_done(job, {});
                 }
               });
  };
  if (stripe_log_ == nullptr) {
    write_in_place(std::move(writes), std::nullopt);
    return;
  }
  // The write hole: the new contents go to the log first, durably.
  std::vector<StripeLogWrite> logged;
  for (const PlannedIo& w : writes) logged.push_back({w.member, w.offset, {w.data, w.length}});
  stripe_log_->log(
      s.stripe, std::move(logged),
      [job, writes = std::move(writes), write_in_place, this](Result<uint64_t> token) mutable {
        if (!token) {
          stripe_done(job, fail(token.error().code, "stripe log: {}", token.error().message));
          return;
        }
        write_in_place(std::move(writes), *token);
      });
}

void Volume::stripe_done(std::shared_ptr<WriteJob> job, Result<void> result) {
  if (!result) {
    std::lock_guard lock(job->mutex);
    if (!job->error) job->error = result.error();
  }
  if (job->remaining.fetch_sub(1) != 1) return;
  if (intent_ != nullptr) {
    auto [begin, end] = member_range(job->stripes.front().stripe, job->stripes.back().stripe);
    intent_->end_write(begin, end);
  }
  after_failures_recorded([this, job] {
    for (const StripeWrite& s : job->stripes) locks_.release(s.stripe);
    Callback done = std::move(job->done);
    if (job->error) {
      done(fail(*job->error));
    } else {
      done({});
    }
  });
}

// ---------------------------------------------------------------------------------------
// Read path

void Volume::read(std::vector<VolumePiece> pieces, Callback done) {
  if (auto ok = check_pieces(pieces); !ok) {
    done(fail(ok.error()));
    return;
  }
  if (pieces.size() == 1 && read_one(pieces[0], done)) return;
  auto job = std::make_shared<ReadJob>();
  job->done = std::move(done);
  const uint64_t chunk = geometry_.chunk_size();
  std::vector<VolumePiece> segments;
  for (const VolumePiece& piece : pieces) {
    uint64_t offset = piece.offset;
    size_t at = 0;
    while (at < piece.data.size()) {
      const uint64_t length = std::min<uint64_t>(piece.data.size() - at, chunk - offset % chunk);
      segments.push_back({offset, piece.data.subspan(at, length)});
      offset += length;
      at += length;
    }
  }
  read_segments(job, std::move(segments));
  read_part_done(job, {});
}

// A read within one chunk whose member is there (a 4 KiB random read): one request straight
// to that member, without the job, the batch and the half-dozen allocations a scattered read
// needs. False (and `done` untouched) when it does not apply. A failed request takes the
// general path, which notes the failure and reads another copy or rebuilds from parity.
bool Volume::read_one(const VolumePiece& seg, Callback& done) {
  const uint64_t chunk = geometry_.chunk_size();
  if (seg.data.size() > chunk - seg.offset % chunk) return false;
  const uint64_t stripe_size = geometry_.stripe_data_size();
  const uint64_t stripe = seg.offset / stripe_size;
  const auto index = static_cast<unsigned>(seg.offset % stripe_size / chunk);
  const uint64_t spread =
      geometry_.copies() > 1 ? read_cursor_.fetch_add(1, std::memory_order_relaxed) : 0;
  const std::optional<ChunkLocation> from = level_->read_from(stripe, index, is_active(), spread);
  if (!from || members_[from->member] == nullptr ||
      seg.data.size() > members_[from->member]->limits().max_io) {
    return false;
  }
  stats_.member_read_ios.fetch_add(1, std::memory_order_relaxed);
  stats_.direct_reads.fetch_add(1, std::memory_order_relaxed);
  MemberRequest request;
  request.op = MemberOp::read;
  request.offset = data_offset_ + from->member_offset + seg.offset % chunk;
  request.iov.push_back({seg.data.data(), seg.data.size()});
  request.done = [this, seg, member = from->member,
                  done = std::move(done)](int64_t result) mutable {
    if (result >= 0 && static_cast<uint64_t>(result) == seg.data.size()) return done({});
    note_failures({FailedIo{member, 0, result < 0 ? static_cast<int>(-result) : EIO}});
    auto job = std::make_shared<ReadJob>();
    job->done = std::move(done);
    read_segments(job, {seg});
    read_part_done(job, {});
  };
  members_[from->member]->submit(std::move(request));
  return true;
}

void Volume::read_segments(std::shared_ptr<ReadJob> job, std::vector<VolumePiece> segments) {
  const uint64_t stripe_size = geometry_.stripe_data_size();
  const uint64_t chunk = geometry_.chunk_size();
  std::vector<PlannedIo> ios;
  std::vector<VolumePiece> degraded;
  std::optional<Error> unreadable;
  const Level::Active live = is_active();
  for (uint32_t tag = 0; tag < segments.size(); ++tag) {
    const VolumePiece& seg = segments[tag];
    const uint64_t stripe = seg.offset / stripe_size;
    const unsigned index = static_cast<unsigned>(seg.offset % stripe_size / chunk);
    const uint64_t within = seg.offset % chunk;
    const uint64_t spread =
        geometry_.copies() > 1 ? read_cursor_.fetch_add(1, std::memory_order_relaxed) : 0;
    const std::optional<ChunkLocation> from = level_->read_from(stripe, index, live, spread);
    if (from) {
      ios.push_back({from->member, data_offset_ + from->member_offset + within, seg.data.data(),
                     seg.data.size(), tag});
    } else if (geometry_.has_parity()) {
      degraded.push_back(seg);
    } else {
      unreadable = Error{EIO, fmt::format("volume byte {}: no surviving copy", seg.offset)};
    }
  }
  job->remaining.fetch_add((ios.empty() ? 0 : 1) + degraded.size() + (unreadable ? 1 : 0));
  if (unreadable) read_part_done(job, fail(*unreadable));
  if (!ios.empty()) {
    stats_.member_read_ios.fetch_add(ios.size(), std::memory_order_relaxed);
    submit_ios(members_, MemberOp::read, std::move(ios), false,
               [this, job, segments](std::vector<FailedIo> failures) {
                 if (!failures.empty()) {
                   note_failures(failures);
                   std::vector<VolumePiece> retry;
                   std::vector<bool> seen(segments.size(), false);
                   for (const FailedIo& f : failures) {
                     if (!seen[f.tag]) retry.push_back(segments[f.tag]);
                     seen[f.tag] = true;
                   }
                   // Served again from another copy or rebuilt from parity, if any remain.
                   read_segments(job, std::move(retry));
                 }
                 read_part_done(job, {});
               });
  }
  for (const VolumePiece& seg : degraded) read_degraded(job, seg);
}

void Volume::read_degraded(std::shared_ptr<ReadJob> job, VolumePiece seg) {
  const uint64_t stripe = seg.offset / geometry_.stripe_data_size();
  auto work = [this, job, seg, stripe] {
    const unsigned k = geometry_.data_chunks();
    const unsigned parities = geometry_.parity_chunks();
    const unsigned target =
        static_cast<unsigned>(seg.offset % geometry_.stripe_data_size() / geometry_.chunk_size());
    const uint64_t length = seg.data.size();
    const uint64_t at =
        data_offset_ + stripe * geometry_.chunk_size() + seg.offset % geometry_.chunk_size();
    auto scratch = std::make_shared<AlignedBuffer>((k + parities) * length);
    auto chunks = std::make_shared<std::vector<std::byte*>>();
    auto missing = std::make_shared<std::vector<unsigned>>();
    std::vector<PlannedIo> reads;
    for (unsigned i = 0; i < k + parities; ++i) {
      // The wanted chunk is rebuilt straight into the caller's buffer.
      std::byte* where = i == target ? seg.data.data() : scratch->data() + i * length;
      chunks->push_back(where);
      const unsigned m = i < k ? geometry_.locate(stripe, i).member
                               : (i == k ? geometry_.p_member(stripe) : geometry_.q_member(stripe));
      if (active(m)) {
        reads.push_back({m, at, where, length, i});
      } else {
        missing->push_back(i);
      }
    }
    stats_.degraded_reads.fetch_add(1, std::memory_order_relaxed);
    stats_.member_read_ios.fetch_add(reads.size(), std::memory_order_relaxed);
    submit_ios(members_, MemberOp::read, std::move(reads), false,
               [this, job, seg, stripe, scratch, chunks, missing, parities,
                length](std::vector<FailedIo> failures) {
                 if (!failures.empty()) {
                   note_failures(failures);
                   locks_.release(stripe);
                   if (failed()) {
                     read_part_done(
                         job, fail(EIO, "volume byte {}: too many members failed", seg.offset));
                   } else {
                     read_degraded(job, seg);
                   }
                   return;
                 }
                 auto ok = parity::recover(*chunks, parities, *missing, length);
                 locks_.release(stripe);
                 read_part_done(job, ok);
               });
  };
  // Rebuilding needs a stable stripe: no write may change data and parity meanwhile.
  if (locks_.acquire(stripe, work)) work();
}

void Volume::read_part_done(std::shared_ptr<ReadJob> job, Result<void> result) {
  if (!result) {
    std::lock_guard lock(job->mutex);
    if (!job->error) job->error = result.error();
  }
  if (job->remaining.fetch_sub(1) != 1) return;
  Callback done = std::move(job->done);
  if (job->error) {
    done(fail(*job->error));
  } else {
    done({});
  }
}

// ---------------------------------------------------------------------------------------
// Flush, blocking forms, verification

void Volume::flush(Callback done) {
  struct Shared {
    std::atomic<unsigned> remaining{0};
    std::mutex mutex;
    std::optional<Error> error;
    Callback done;
  };
  auto shared = std::make_shared<Shared>();
  shared->done = std::move(done);
  std::vector<unsigned> targets;
  for (unsigned i = 0; i < geometry_.members(); ++i) {
    if (active(i)) targets.push_back(i);
  }
  if (targets.empty()) {
    shared->done(fail(EIO, "flush failed: no active member"));
    return;
  }
  shared->remaining.store(static_cast<unsigned>(targets.size()));
  for (unsigned i : targets) {
    MemberRequest request;
    request.op = MemberOp::flush;
    request.done = [this, shared, i](int64_t result) {
      if (result < 0) {
        fail_member(i, Error{static_cast<int>(-result),
                             fmt::format("flush failed: {}", std::strerror(-result))});
      }
      if (shared->remaining.fetch_sub(1) != 1) return;
      after_failures_recorded([this, shared] {
        if (failed()) {
          shared->done(fail(EIO, "flush failed: {} members missing", missing_members()));
        } else {
          shared->done({});
        }
      });
    };
    members_[i]->submit(std::move(request));
  }
}

Result<void> Volume::read(uint64_t offset, std::span<std::byte> data) {
  return wait_for<Result<void>>([&](Callback done) { read({{offset, data}}, std::move(done)); });
}

Result<void> Volume::write(uint64_t offset, std::span<const std::byte> data) {
  std::span<std::byte> mutable_view(const_cast<std::byte*>(data.data()), data.size());
  return wait_for<Result<void>>([&](Callback done) {
    write({{offset, mutable_view}}, std::move(done));
  });
}

Result<void> Volume::flush() {
  return wait_for<Result<void>>([&](Callback done) { flush(std::move(done)); });
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
