#include "raid/faulty_member.hpp"

#include <cstring>
#include <random>

namespace stripefs {

namespace {

// Flips one byte in every 512-byte sector of [offset, offset+len) that lies in `range`.
void flip_bytes(std::vector<iovec>& iov, uint64_t offset, const ByteRange& range) {
  uint64_t at = offset;
  for (iovec& v : iov) {
    auto* bytes = static_cast<std::byte*>(v.iov_base);
    for (uint64_t i = 0; i < v.iov_len; i += 512) {
      if (range.overlaps(at + i, 1)) bytes[i] ^= std::byte{0x5a};
    }
    at += v.iov_len;
  }
}

}  // namespace

FaultyMember::FaultyMember(Member& inner)
    : Member("faulty:" + inner.name(), inner.size(), inner.limits()), inner_(inner) {
  delay_thread_ = std::thread([this] { delay_loop(); });
}

FaultyMember::~FaultyMember() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  delay_cv_.notify_all();
  delay_thread_.join();
}

void FaultyMember::fail_range(MemberOp op, ByteRange range) {
  std::lock_guard lock(mutex_);
  fail_ranges_.emplace_back(op, range);
}
void FaultyMember::bad_sectors(ByteRange range) {
  std::lock_guard lock(mutex_);
  bad_sectors_.push_back(range);
}
void FaultyMember::fail_after(uint64_t requests) {
  std::lock_guard lock(mutex_);
  fail_after_ = requests_ + requests;
}
void FaultyMember::corrupt_reads(ByteRange range) {
  std::lock_guard lock(mutex_);
  corrupt_reads_.push_back(range);
}
void FaultyMember::corrupt_writes(ByteRange range) {
  std::lock_guard lock(mutex_);
  corrupt_writes_.push_back(range);
}
void FaultyMember::set_latency(std::chrono::microseconds latency) {
  std::lock_guard lock(mutex_);
  latency_ = latency;
}
void FaultyMember::set_volatile_cache(bool enabled) {
  std::lock_guard lock(mutex_);
  volatile_cache_ = enabled;
}
void FaultyMember::heal() {
  std::lock_guard lock(mutex_);
  fail_ranges_.clear();
  fail_after_.reset();
  bad_sectors_.clear();
  corrupt_reads_.clear();
  corrupt_writes_.clear();
}
void FaultyMember::set_logging(bool enabled) {
  std::lock_guard lock(mutex_);
  logging_ = enabled;
}
std::vector<LoggedIo> FaultyMember::take_log() {
  std::lock_guard lock(mutex_);
  return std::exchange(log_, {});
}
uint64_t FaultyMember::requests_seen() const {
  std::lock_guard lock(mutex_);
  return requests_;
}
size_t FaultyMember::cached_writes() const {
  std::lock_guard lock(mutex_);
  return cache_.size();
}

size_t FaultyMember::power_cut(double survive, uint64_t seed) {
  std::vector<CachedWrite> survivors;
  size_t lost = 0;
  {
    std::lock_guard lock(mutex_);
    std::mt19937_64 rng(seed);
    std::bernoulli_distribution keep(survive);
    for (CachedWrite& w : cache_) {
      if (survive > 0 && keep(rng)) {
        survivors.push_back(std::move(w));
      } else {
        ++lost;
      }
    }
    cache_.clear();
  }
  // Writes the device happened to persist before power went away.
  for (CachedWrite& w : survivors) {
    [[maybe_unused]] auto r = member_write(inner_, w.offset, w.data);
  }
  return lost;
}

void FaultyMember::hold(MemberOp op, ByteRange range) {
  std::lock_guard lock(mutex_);
  hold_op_ = op;
  hold_range_ = range;
}

void FaultyMember::release_held() {
  std::vector<MemberRequest> held;
  {
    std::lock_guard lock(mutex_);
    hold_range_.reset();
    held.swap(held_);
  }
  for (MemberRequest& request : held) submit(std::move(request));
}

size_t FaultyMember::held() const {
  std::lock_guard lock(mutex_);
  return held_.size();
}

void FaultyMember::submit(MemberRequest request) {
  std::chrono::microseconds latency;
  {
    std::lock_guard lock(mutex_);
    if (hold_range_ && request.op == hold_op_ &&
        hold_range_->overlaps(request.offset, request.length())) {
      held_.push_back(std::move(request));
      return;
    }
    latency = latency_;
  }
  if (latency.count() == 0) {
    dispatch(std::move(request));
    return;
  }
  {
    std::lock_guard lock(mutex_);
    delayed_.push_back({std::chrono::steady_clock::now() + latency, std::move(request)});
  }
  delay_cv_.notify_one();
}

void FaultyMember::delay_loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    delay_cv_.wait(lock, [this] { return stopping_ || !delayed_.empty(); });
    if (delayed_.empty()) return;  // stopping
    auto due = delayed_.front().due;
    if (std::chrono::steady_clock::now() < due) {
      delay_cv_.wait_until(lock, due);
      continue;
    }
    MemberRequest request = std::move(delayed_.front().request);
    delayed_.pop_front();
    lock.unlock();
    dispatch(std::move(request));
    lock.lock();
  }
}

void FaultyMember::dispatch(MemberRequest request) {
  const uint64_t length = request.length();
  bool failed = false;
  bool cache = false;
  std::optional<ByteRange> corrupt_write;
  {
    std::lock_guard lock(mutex_);
    ++requests_;
    if (logging_) log_.push_back({request.op, request.offset, length, request.fua, request.iov});
    if (fail_after_ && requests_ > *fail_after_) failed = true;
    for (auto& [op, range] : fail_ranges_) {
      if (op == request.op && range.overlaps(request.offset, length)) failed = true;
    }
    if (request.op == MemberOp::read) {
      for (const ByteRange& range : bad_sectors_) {
        if (range.overlaps(request.offset, length)) failed = true;
      }
    } else if (request.op == MemberOp::write && !failed) {
      std::erase_if(bad_sectors_, [&](const ByteRange& range) {
        return range.overlaps(request.offset, length);  // remapped
      });
    }
    if (request.op == MemberOp::write) {
      for (auto& range : corrupt_writes_) {
        if (range.overlaps(request.offset, length)) corrupt_write = range;
      }
      cache = volatile_cache_ && !request.fua;
    }
  }
  if (failed) {
    request.done(-EIO);
    return;
  }
  if (request.op == MemberOp::flush) {
    flush_cache(std::move(request));
    return;
  }
  if (request.op == MemberOp::write && request.fua) {
    // A FUA write bypasses the cache, but older cached writes to the same bytes must not
    // show through reads or be written back over it later: they now hold its data too.
    std::lock_guard lock(mutex_);
    for (CachedWrite& w : cache_) {
      uint64_t at = request.offset;
      for (const iovec& v : request.iov) {
        const uint64_t lo = std::max(at, w.offset);
        const uint64_t hi = std::min(at + v.iov_len, w.offset + w.data.size());
        if (lo < hi) {
          std::memcpy(w.data.data() + (lo - w.offset),
                      static_cast<const std::byte*>(v.iov_base) + (lo - at), hi - lo);
        }
        at += v.iov_len;
      }
    }
  }
  if (request.op == MemberOp::write && (cache || corrupt_write)) {
    // The device holds its own copy of the data from here on.
    CachedWrite w{request.offset, std::vector<std::byte>(length)};
    uint64_t at = 0;
    for (const iovec& v : request.iov) {
      std::memcpy(w.data.data() + at, v.iov_base, v.iov_len);
      at += v.iov_len;
    }
    if (corrupt_write) {
      std::vector<iovec> one{{w.data.data(), w.data.size()}};
      flip_bytes(one, request.offset, *corrupt_write);
    }
    if (cache) {
      {
        std::lock_guard lock(mutex_);
        cache_.push_back(std::move(w));
      }
      request.done(static_cast<int64_t>(length));
      return;
    }
    auto owned = std::make_shared<std::vector<std::byte>>(std::move(w.data));
    MemberRequest out;
    out.op = MemberOp::write;
    out.offset = request.offset;
    out.fua = request.fua;
    out.iov.push_back({owned->data(), owned->size()});
    out.done = [owned, done = std::move(request.done)](int64_t r) { done(r); };
    forward(std::move(out));
    return;
  }
  forward(std::move(request));
}

void FaultyMember::forward(MemberRequest request) {
  if (request.op != MemberOp::read) {
    inner_.submit(std::move(request));
    return;
  }
  // Reads see the volatile cache on top of the medium, and may come back corrupted.
  auto iov = request.iov;
  const uint64_t offset = request.offset;
  request.done = [this, iov, offset, done = std::move(request.done)](int64_t r) mutable {
    if (r > 0) {
      std::lock_guard lock(mutex_);
      const uint64_t length = static_cast<uint64_t>(r);
      for (const CachedWrite& w : cache_) {
        const uint64_t lo = std::max(offset, w.offset);
        const uint64_t hi = std::min(offset + length, w.offset + w.data.size());
        if (lo >= hi) continue;
        uint64_t at = offset;
        for (const iovec& v : iov) {
          const uint64_t vlo = std::max(lo, at), vhi = std::min(hi, at + v.iov_len);
          if (vlo < vhi) {
            std::memcpy(static_cast<std::byte*>(v.iov_base) + (vlo - at),
                        w.data.data() + (vlo - w.offset), vhi - vlo);
          }
          at += v.iov_len;
        }
      }
      for (const ByteRange& range : corrupt_reads_) flip_bytes(iov, offset, range);
    }
    done(r);
  };
  inner_.submit(std::move(request));
}

void FaultyMember::flush_cache(MemberRequest request) {
  std::vector<CachedWrite> pending;
  {
    std::lock_guard lock(mutex_);
    pending = std::exchange(cache_, {});
  }
  // Write back in arrival order (later writes win), then flush the medium.
  auto writes = std::make_shared<std::vector<CachedWrite>>(std::move(pending));
  auto done = std::make_shared<std::function<void(int64_t)>>(std::move(request.done));
  auto step = std::make_shared<std::function<void(size_t)>>();
  *step = [this, writes, done, step](size_t i) {
    if (i == writes->size()) {
      MemberRequest flush;
      flush.op = MemberOp::flush;
      flush.done = [done, step](int64_t r) {
        (*done)(r);
        *step = nullptr;  // break the self-reference
      };
      inner_.submit(std::move(flush));
      return;
    }
    MemberRequest w;
    w.op = MemberOp::write;
    w.offset = (*writes)[i].offset;
    w.iov.push_back({(*writes)[i].data.data(), (*writes)[i].data.size()});
    w.done = [done, step, i](int64_t r) {
      if (r < 0) {
        (*done)(r);
        *step = nullptr;
        return;
      }
      (*step)(i + 1);
    };
    inner_.submit(std::move(w));
  };
  (*step)(0);
}

}  // namespace stripefs
