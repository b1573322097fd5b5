#include "raid/volume.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

#include "raid/io_batch.hpp"
#include "raid/join.hpp"
#include "raid/log.hpp"
#include "raid/wait.hpp"

namespace stripefs {

// A write under way: its stripes, locked in ascending order (the order that keeps
// concurrent jobs deadlock-free), each handed to the level once all are locked.
struct Volume::WriteJob {
  std::vector<StripeWrite> stripes;
  Callback done;
  size_t locked = 0;
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
                   parity_arena_buffers(geometry_), 64),
      io_{geometry_, *level_, members_, data_offset_, stats_, locks_, parity_pool_, nullptr} {}

bool Volume::failed() const {
  return io_.failed();
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
// Write path: split by stripe, lock, announce to the bitmap, hand each stripe to the level.

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

void Volume::start_write(std::shared_ptr<WriteJob> job) {
  if (intent_ == nullptr) {
    issue_write(std::move(job));
    return;
  }
  // Nothing reaches a member before the bitmap says this range may be inconsistent.
  auto [begin, end] = member_range(job->stripes.front().stripe, job->stripes.back().stripe);
  intent_->begin_write(begin, end, [this, job] { issue_write(job); });
}

// Every stripe the level can write at once goes out in one batch, so that the member
// requests of neighbouring stripes merge (sequential writes stay contiguous on each member);
// the others (partial parity stripes) each read first.
void Volume::issue_write(std::shared_ptr<WriteJob> job) {
  std::vector<PlannedIo> ios;
  std::vector<size_t> partial;
  for (size_t i = 0; i < job->stripes.size(); ++i) {
    if (!level_->plan_write(io_, job->stripes[i], ios)) partial.push_back(i);
  }
  if (ios.empty() && partial.empty()) {
    // Every target is gone (RAID0 member, all copies): nothing to wait for.
    finish_write(job, failed() ? fail(EIO,
                                      "write failed: no surviving member holds volume "
                                      "stripe {}",
                                      job->stripes.front().stripe)
                               : Result<void>{});
    return;
  }
  auto join = Join::start(partial.size() + (ios.empty() ? 0 : 1), [this, job](Result<void> result) {
    finish_write(job, std::move(result));
  });
  if (!ios.empty()) {
    VolumeCounters::add(stats_.member_write_ios, ios.size());
    auto submit = [this, join, ios = std::move(ios)]() mutable {
      submit_ios(members_.all(), MemberOp::write, std::move(ios), false,
                 [this, join](std::vector<FailedIo> failures) {
                   members_.note_failures(failures);
                   if (failed()) {
                     join->finish(fail(EIO, "write failed: {} members missing, {} tolerates {}",
                                       missing_members(), to_string(geometry_.level()),
                                       geometry_.redundancy()));
                   } else {
                     join->finish();
                   }
                 });
    };
    // Full stripes bypass the stripe log: it must first be unable to replay older records
    // of theirs over them.
    std::vector<uint64_t> full;
    if (io_.stripe_log != nullptr) {
      for (const StripeWrite& s : job->stripes) {
        if (s.full) full.push_back(s.stripe);
      }
    }
    if (full.empty()) {
      submit();
    } else {
      io_.stripe_log->before_bypass(
          std::move(full), [join, submit = std::move(submit)](Result<void> ok) mutable {
            if (ok) {
              submit();
            } else {
              join->finish(fail(ok.error().code, "stripe log: {}", ok.error().message));
            }
          });
    }
  }
  for (size_t i : partial) {
    level_->write_partial(io_, job->stripes[i], [join](Result<void> r) { join->finish(r); });
  }
}

// Every stripe of the job is done: the bitmap hears of it, and once every member failure
// met on the way is recorded, the stripes are unlocked and the caller answered.
void Volume::finish_write(std::shared_ptr<WriteJob> job, Result<void> result) {
  if (intent_ != nullptr) {
    auto [begin, end] = member_range(job->stripes.front().stripe, job->stripes.back().stripe);
    intent_->end_write(begin, end);
  }
  members_.after_failures_recorded([this, job, result = std::move(result)]() mutable {
    for (const StripeWrite& s : job->stripes) locks_.release(s.stripe);
    Callback done = std::move(job->done);
    done(std::move(result));
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
  // One part for the submitter until everything is issued.
  auto join = Join::start(1, std::move(done));
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
  read_segments(join, std::move(segments));
  join->finish();
}

// A read within one chunk whose member is there (a 4 KiB random read): one request straight
// to that member, without the join, the batch and the half-dozen allocations a scattered
// read needs. False (and `done` untouched) when it does not apply. A failed request takes
// the general path, which notes the failure and reads another copy or rebuilds from parity.
bool Volume::read_one(const VolumePiece& seg, Callback& done) {
  const uint64_t chunk = geometry_.chunk_size();
  if (seg.data.size() > chunk - seg.offset % chunk) return false;
  const uint64_t stripe_size = geometry_.stripe_data_size();
  const uint64_t stripe = seg.offset / stripe_size;
  const auto index = static_cast<unsigned>(seg.offset % stripe_size / chunk);
  const uint64_t spread =
      geometry_.copies() > 1 ? read_cursor_.fetch_add(1, std::memory_order_relaxed) : 0;
  const std::optional<ChunkLocation> from =
      level_->read_from(stripe, index, members_.active_fn(), spread);
  Member* device = from ? members_[from->member] : nullptr;  // read once: it may be swapped
  if (device == nullptr || seg.data.size() > device->limits().max_io) return false;
  VolumeCounters::add(stats_.member_read_ios, 1);
  VolumeCounters::add(stats_.direct_reads, 1);
  MemberRequest request;
  request.op = MemberOp::read;
  request.offset = data_offset_ + from->member_offset + seg.offset % chunk;
  request.iov.push_back({seg.data.data(), seg.data.size()});
  request.done = [this, seg, device, member = from->member, at = request.offset,
                  done = std::move(done)](int64_t result) mutable {
    const bool ok = result >= 0 && static_cast<uint64_t>(result) == seg.data.size();
    device->count(MemberOp::read, ok ? seg.data.size() : 0, ok);
    if (ok) return done({});
    read_failed(seg, member, at, result < 0 ? static_cast<int>(-result) : EIO, std::move(done));
  };
  device->start(std::move(request));
  return true;
}

// Each segment (within one chunk) from a copy in service, in one batch; a segment none of
// whose copies is in service goes to the level (parity rebuilds it). Segments whose member
// fails them are healed or read again (read_failed).
void Volume::read_segments(std::shared_ptr<Join> join, std::vector<VolumePiece> segments) {
  const uint64_t stripe_size = geometry_.stripe_data_size();
  const uint64_t chunk = geometry_.chunk_size();
  std::vector<PlannedIo> ios;
  std::vector<VolumePiece> lost;
  std::vector<uint64_t> where(segments.size());  // each segment's member offset
  const Level::Active live = members_.active_fn();
  for (uint32_t tag = 0; tag < segments.size(); ++tag) {
    const VolumePiece& seg = segments[tag];
    const uint64_t stripe = seg.offset / stripe_size;
    const unsigned index = static_cast<unsigned>(seg.offset % stripe_size / chunk);
    const uint64_t within = seg.offset % chunk;
    const uint64_t spread =
        geometry_.copies() > 1 ? read_cursor_.fetch_add(1, std::memory_order_relaxed) : 0;
    const std::optional<ChunkLocation> from = level_->read_from(stripe, index, live, spread);
    if (from) {
      where[tag] = data_offset_ + from->member_offset + within;
      ios.push_back({from->member, where[tag], seg.data.data(), seg.data.size(), tag});
    } else {
      lost.push_back(seg);
    }
  }
  join->add((ios.empty() ? 0 : 1) + lost.size());
  if (!ios.empty()) {
    VolumeCounters::add(stats_.member_read_ios, ios.size());
    submit_ios(members_.all(), MemberOp::read, std::move(ios), false,
               [this, join, segments, where = std::move(where)](std::vector<FailedIo> failures) {
                 std::vector<bool> seen(segments.size(), false);
                 for (const FailedIo& f : failures) {
                   if (seen[f.tag]) continue;
                   seen[f.tag] = true;
                   join->add(1);
                   read_failed(segments[f.tag], f.member, where[f.tag], f.error,
                               [join](Result<void> r) { join->finish(std::move(r)); });
                 }
                 join->finish();
               });
  }
  for (const VolumePiece& seg : lost) {
    level_->read_lost(io_, seg, [join](Result<void> r) { join->finish(r); });
  }
}

// ---------------------------------------------------------------------------------------
// Flush and the blocking forms

void Volume::flush(Callback done) {
  std::vector<unsigned> targets;
  for (unsigned i = 0; i < geometry_.members(); ++i) {
    if (members_.written(i)) targets.push_back(i);
  }
  if (targets.empty()) {
    done(fail(EIO, "flush failed: no active member"));
    return;
  }
  // A member whose flush fails leaves; the flush fails only if the array did.
  auto join = Join::start(targets.size(), [this, done = std::move(done)](Result<void>) mutable {
    members_.after_failures_recorded([this, done = std::move(done)] {
      if (failed()) {
        done(fail(EIO, "flush failed: {} members missing", missing_members()));
      } else {
        done({});
      }
    });
  });
  for (unsigned i : targets) {
    MemberRequest request;
    request.op = MemberOp::flush;
    request.done = [this, join, i](int64_t result) {
      if (result < 0) {
        fail_member(i, Error{static_cast<int>(-result),
                             fmt::format("flush failed: {}", std::strerror(-result))});
      }
      join->finish();
    };
    members_[i]->start(std::move(request));
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

}  // namespace stripefs
