#include "raid/parity_stripe.hpp"

#include <memory>
#include <optional>

#include "raid/level.hpp"
#include "raid/parity.hpp"

namespace stripefs::parity_stripe {

namespace {

void finish_partial(StripeIo& io, StripeWrite& s, IoDone done, bool rmw);

// Data indexes 0..k-1, then P and Q: the member holding each in stripe `stripe`.
unsigned member_of(const Geometry& g, uint64_t stripe, unsigned i) {
  const unsigned k = g.data_chunks();
  return i < k ? g.locate(stripe, i).member : (i == k ? g.p_member(stripe) : g.q_member(stripe));
}

}  // namespace

void plan_full(StripeIo& io, StripeWrite& s, std::vector<PlannedIo>& ios) {
  const Geometry& g = io.geometry;
  const uint64_t chunk = g.chunk_size();
  s.parity = io.parity_pool.take();
  std::byte* p = s.parity.data();
  std::byte* q = g.parity_chunks() == 2 ? p + chunk : nullptr;
  // Parity straight from the caller's buffers, which are then written as they are.
  generate_segmented(s.data, 0, chunk, p, q);
  io.level.plan_direct(io, s, ios);
  const uint64_t row = io.data_offset + s.stripe * chunk;
  const unsigned pm = g.p_member(s.stripe);
  if (io.members.in_sync(pm, s.stripe)) ios.push_back({pm, row, p, chunk, 0});
  if (q != nullptr) {
    const unsigned qm = g.q_member(s.stripe);
    if (io.members.in_sync(qm, s.stripe)) ios.push_back({qm, row, q, chunk, 0});
  }
  VolumeCounters::add(io.stats.full_stripe_writes, 1);
  VolumeCounters::add(io.stats.full_stripe_bytes, s.bytes);
}

// A partial stripe works on the rows [lo, hi) of its chunks, with one scratch slot of that
// size per chunk: data indexes 0..k-1, then P and Q.
void write_partial(StripeIo& io, StripeWrite& s, IoDone done) {
  const Geometry& g = io.geometry;
  const unsigned k = g.data_chunks();
  const unsigned parities = g.parity_chunks();
  const uint64_t range = s.hi - s.lo;
  const uint64_t row = io.data_offset + s.stripe * g.chunk_size();
  s.buffer = AlignedBuffer((k + parities) * range);
  auto slot = [&](unsigned i) { return s.buffer.data() + i * range; };
  auto member = [&](unsigned i) { return member_of(g, s.stripe, i); };

  s.planned_missing = 0;
  for (unsigned i = 0; i < k + parities; ++i) {
    if (!io.members.in_sync(member(i), s.stripe)) s.planned_missing |= uint64_t{1} << i;
  }
  const bool degraded = s.planned_missing != 0;

  std::vector<PlannedIo> reads;
  bool rmw = false;
  if (degraded) {
    // Read every surviving chunk's rows; the missing ones are rebuilt before writing.
    for (unsigned i = 0; i < k + parities; ++i) {
      if (io.members.in_sync(member(i), s.stripe)) {
        reads.push_back({member(i), row + s.lo, slot(i), range, i});
      }
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
          reads.push_back({member(i), row + seg.chunk_offset, slot(i) + (seg.chunk_offset - s.lo),
                           seg.length, i});
        }
      } else {
        for (const Segment& gap : fill_gaps(s.data[i], s.lo, s.hi, slot(i), false)) {
          reads.push_back({member(i), row + gap.chunk_offset, gap.data, gap.length, i});
        }
      }
    }
    if (rmw) {
      for (unsigned i = k; i < k + parities; ++i) {
        reads.push_back({member(i), row + s.lo, slot(i), range, i});
      }
    }
  }
  uint64_t read_bytes = 0;
  for (const PlannedIo& r : reads) read_bytes += r.length;
  VolumeCounters::add(io.stats.prereads, reads.size());
  VolumeCounters::add(io.stats.preread_bytes, read_bytes);
  VolumeCounters::add(io.stats.member_read_ios, reads.size());
  submit_ios(io.members.all(), MemberOp::read, std::move(reads), false,
             [&io, &s, done = std::move(done), rmw](std::vector<FailedIo> failures) mutable {
               if (!failures.empty()) {
                 io.members.note_failures(failures);
                 if (io.failed()) {
                   done(fail(EIO, "stripe {}: too many members failed", s.stripe));
                 } else {
                   write_partial(io, s, std::move(done));  // again, now degraded
                 }
                 return;
               }
               finish_partial(io, s, std::move(done), rmw);
             });
}

namespace {

// The partial stripe's new data and parity, in place; `token` is its stripe log record's.
void write_in_place(StripeIo& io, std::vector<PlannedIo> writes, std::optional<uint64_t> token,
                    IoDone done) {
  submit_ios(io.members.all(), MemberOp::write, std::move(writes), false,
             [&io, token, done = std::move(done)](std::vector<FailedIo> failures) {
               io.members.note_failures(failures);
               if (token) io.stripe_log->written(*token);
               if (io.failed()) {
                 done(fail(EIO, "write failed: {} members missing", io.members.missing()));
               } else {
                 done({});
               }
             });
}

void finish_partial(StripeIo& io, StripeWrite& s, IoDone done, bool rmw) {
  const Geometry& g = io.geometry;
  const unsigned k = g.data_chunks();
  const unsigned parities = g.parity_chunks();
  const uint64_t range = s.hi - s.lo;
  const uint64_t row = io.data_offset + s.stripe * g.chunk_size();
  auto slot = [&](unsigned i) { return s.buffer.data() + i * range; };
  auto member = [&](unsigned i) { return member_of(g, s.stripe, i); };
  std::byte* p = slot(k);
  std::byte* q = parities == 2 ? slot(k + 1) : nullptr;

  std::vector<unsigned> missing;
  uint64_t missing_now = 0;
  for (unsigned i = 0; i < k + parities; ++i) {
    if (!io.members.in_sync(member(i), s.stripe)) {
      missing.push_back(i);
      missing_now |= uint64_t{1} << i;
    }
  }
  if (missing_now != s.planned_missing) {
    // A member left while we read: what was read no longer covers what must be rebuilt.
    if (io.failed()) {
      done(fail(EIO, "stripe {}: too many members failed", s.stripe));
    } else {
      write_partial(io, s, std::move(done));
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
    VolumeCounters::add(io.stats.rmw_writes, 1);
  } else {
    if (!missing.empty()) {
      std::vector<std::byte*> chunks;
      for (unsigned i = 0; i < k + parities; ++i) chunks.push_back(slot(i));
      if (auto ok = parity::recover(chunks, parities, missing, range); !ok) {
        done(fail(ok.error()));
        return;
      }
      VolumeCounters::add(io.stats.degraded_writes, 1);
    } else {
      VolumeCounters::add(io.stats.rcw_writes, 1);
    }
    std::vector<std::vector<Segment>> sources(k);
    for (unsigned i = 0; i < k; ++i) sources[i] = fill_gaps(s.data[i], s.lo, s.hi, slot(i), true);
    generate_segmented(sources, s.lo, s.hi, p, q);
  }

  std::vector<PlannedIo> writes;
  for (unsigned i = 0; i < k; ++i) {
    if (!io.members.in_sync(member(i), s.stripe)) continue;
    for (const Segment& seg : s.data[i]) {
      writes.push_back({member(i), row + seg.chunk_offset, seg.data, seg.length, i});
    }
  }
  for (unsigned i = k; i < k + parities; ++i) {
    if (io.members.in_sync(member(i), s.stripe)) {
      writes.push_back({member(i), row + s.lo, slot(i), range, i});
    }
  }
  VolumeCounters::add(io.stats.partial_stripe_writes, 1);
  VolumeCounters::add(io.stats.partial_stripe_bytes, s.bytes);
  VolumeCounters::add(io.stats.member_write_ios, writes.size());
  if (io.stripe_log == nullptr) {
    write_in_place(io, std::move(writes), std::nullopt, std::move(done));
    return;
  }
  // The write hole: the new contents go to the log first, durably.
  std::vector<StripeLogWrite> logged;
  for (const PlannedIo& w : writes) logged.push_back({w.member, w.offset, {w.data, w.length}});
  io.stripe_log->log(
      s.stripe, std::move(logged),
      [&io, writes = std::move(writes), done = std::move(done)](Result<uint64_t> token) mutable {
        if (!token) {
          done(fail(token.error().code, "stripe log: {}", token.error().message));
          return;
        }
        write_in_place(io, std::move(writes), *token, std::move(done));
      });
}

}  // namespace

void rebuild_segment(StripeIo& io, VolumePiece seg, std::optional<unsigned> without, IoDone done) {
  const Geometry& g = io.geometry;
  const uint64_t stripe = seg.offset / g.stripe_data_size();
  const unsigned k = g.data_chunks();
  const unsigned parities = g.parity_chunks();
  const auto target = static_cast<unsigned>(seg.offset % g.stripe_data_size() / g.chunk_size());
  const uint64_t length = seg.data.size();
  const uint64_t at = io.data_offset + stripe * g.chunk_size() + seg.offset % g.chunk_size();
  auto scratch = std::make_shared<AlignedBuffer>((k + parities) * length);
  auto chunks = std::make_shared<std::vector<std::byte*>>();
  auto missing = std::make_shared<std::vector<unsigned>>();
  std::vector<PlannedIo> reads;
  for (unsigned i = 0; i < k + parities; ++i) {
    // The wanted chunk is rebuilt straight into the caller's buffer.
    std::byte* where = i == target ? seg.data.data() : scratch->data() + i * length;
    chunks->push_back(where);
    const unsigned m = member_of(g, stripe, i);
    if (io.members.active(m) && m != without) {
      reads.push_back({m, at, where, length, i});
    } else {
      missing->push_back(i);
    }
  }
  VolumeCounters::add(io.stats.degraded_reads, 1);
  VolumeCounters::add(io.stats.member_read_ios, reads.size());
  if (missing->size() > parities) {
    done(fail(EIO, "volume byte {}: too many members failed", seg.offset));
    return;
  }
  submit_ios(io.members.all(), MemberOp::read, std::move(reads), false,
             [&io, seg, without, scratch, chunks, missing, parities, length,
              done = std::move(done)](std::vector<FailedIo> failures) mutable {
               if (!failures.empty()) {
                 // Again, without the members that failed.
                 io.members.note_failures(failures);
                 if (io.failed()) {
                   done(fail(EIO, "volume byte {}: too many members failed", seg.offset));
                 } else {
                   rebuild_segment(io, seg, without, std::move(done));
                 }
                 return;
               }
               done(parity::recover(*chunks, parities, *missing, length));
             });
}

void read_lost(StripeIo& io, VolumePiece seg, IoDone done) {
  const uint64_t stripe = seg.offset / io.geometry.stripe_data_size();
  auto work = [&io, seg, stripe, done = std::move(done)]() mutable {
    rebuild_segment(io, seg, std::nullopt, [&io, stripe, done = std::move(done)](Result<void> r) {
      io.locks.release(stripe);
      done(std::move(r));
    });
  };
  // Rebuilding needs a stable stripe: no write may change data and parity meanwhile.
  auto shared_work = std::make_shared<decltype(work)>(std::move(work));
  if (io.locks.acquire(stripe, [shared_work] { (*shared_work)(); })) (*shared_work)();
}

}  // namespace stripefs::parity_stripe
