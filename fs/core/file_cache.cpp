#include "fs/core/file_cache.hpp"

#include <algorithm>

namespace stripefs::fs {

std::vector<ByteRun> FileCache::drop(uint64_t offset, uint64_t end) {
  std::vector<ByteRun> dropped;
  auto it = ranges_.upper_bound(offset);
  if (it != ranges_.begin()) --it;
  while (it != ranges_.end() && it->first < end) {
    const uint64_t start = it->first;
    CachedRange r = it->second;
    if (start + r.length <= offset) {
      ++it;
      continue;
    }
    it = ranges_.erase(it);
    const uint64_t cut_begin = std::max(offset, start);
    const uint64_t cut_end = std::min(end, start + r.length);
    if (start < cut_begin) {
      CachedRange head = r;
      head.length = cut_begin - start;
      ranges_.emplace(start, head);
    }
    if (cut_end < start + r.length) {
      CachedRange tail = r;
      tail.buffer_offset += cut_end - start;
      tail.length = start + r.length - cut_end;
      it = ranges_.emplace(cut_end, tail).first;
    }
    if (!r.in_flight) {
      dirty_bytes_ -= cut_end - cut_begin;
      dropped.emplace_back(cut_begin, cut_end);
    }
  }
  return dropped;
}

std::vector<ByteRun> FileCache::insert(uint64_t offset, uint64_t length,
                                       std::shared_ptr<AlignedBuffer> buffer, size_t buffer_offset,
                                       uint64_t since) {
  std::vector<ByteRun> replaced = drop(offset, offset + length);
  ranges_.emplace(offset, CachedRange{.length = length,
                                      .buffer = std::move(buffer),
                                      .buffer_offset = buffer_offset,
                                      .in_flight = false,
                                      .job = 0,
                                      .since = since});
  dirty_bytes_ += length;
  since_bound_ = std::min(since_bound_, since);
  return replaced;
}

void FileCache::cut(uint64_t at) {
  auto it = ranges_.upper_bound(at);
  if (it == ranges_.begin()) return;
  --it;
  if (it->first < at && at < it->first + it->second.length) {
    CachedRange tail = it->second;
    tail.buffer_offset += at - it->first;
    tail.length = it->first + it->second.length - at;
    it->second.length = at - it->first;
    ranges_.emplace(at, tail);
  }
}

uint64_t FileCache::freeze(uint64_t offset, uint64_t end, uint64_t job,
                           const std::function<Freeze(uint64_t, const CachedRange&)>& decide) {
  cut(offset);
  if (end != UINT64_MAX) cut(end);
  uint64_t frozen = 0;
  for (auto it = ranges_.lower_bound(offset); it != ranges_.end() && it->first < end; ++it) {
    CachedRange& r = it->second;
    if (r.in_flight) continue;
    const Freeze what = decide(it->first, r);
    if (what == Freeze::stop) break;
    if (what == Freeze::skip) continue;
    r.in_flight = true;
    r.job = job;
    dirty_bytes_ -= r.length;
    frozen += r.length;
  }
  return frozen;
}

size_t FileCache::release_job(uint64_t job, uint64_t begin, uint64_t end) {
  size_t released = 0;
  for (auto it = ranges_.lower_bound(begin); it != ranges_.end() && it->first < end;) {
    if (it->second.in_flight && it->second.job == job) {
      it = ranges_.erase(it);
      ++released;
    } else {
      ++it;
    }
  }
  return released;
}

std::optional<std::pair<uint64_t, const CachedRange*>> FileCache::covering(uint64_t offset,
                                                                           uint64_t size) const {
  auto it = ranges_.upper_bound(offset);
  if (it == ranges_.begin()) return std::nullopt;
  --it;
  if (it->first <= offset && it->first + it->second.length >= offset + size) {
    return std::pair{it->first, &it->second};
  }
  return std::nullopt;
}

void FileCache::split(
    uint64_t begin, uint64_t end,
    const std::function<void(uint64_t, uint64_t, const CachedRange&, uint64_t)>& cached,
    const std::function<void(uint64_t, uint64_t)>& uncached) const {
  uint64_t at = begin;
  auto it = ranges_.upper_bound(begin);
  if (it != ranges_.begin()) --it;
  for (; it != ranges_.end() && it->first < end; ++it) {
    const uint64_t start = it->first, stop = start + it->second.length;
    if (stop <= at) continue;
    if (start > at) uncached(at, start);
    const uint64_t from = std::max(start, at), to = std::min(stop, end);
    cached(from, to - from, it->second, from - start);
    at = to;
  }
  if (at < end) uncached(at, end);
}

std::optional<ByteRun> FileCache::range_after(uint64_t offset) const {
  auto it = ranges_.upper_bound(offset);
  if (it != ranges_.begin() && std::prev(it)->first + std::prev(it)->second.length > offset) --it;
  if (it == ranges_.end()) return std::nullopt;
  return ByteRun{it->first, it->first + it->second.length};
}

std::optional<ByteRun> FileCache::dirty_run_around(uint64_t offset, uint64_t end,
                                                   uint64_t max_before) const {
  auto it = ranges_.find(offset);
  if (it == ranges_.end()) return std::nullopt;
  uint64_t lo = offset, hi = end;
  for (auto l = it; l != ranges_.begin();) {
    auto p = std::prev(l);
    if (p->second.in_flight || p->first + p->second.length != lo || offset - p->first > max_before)
      break;
    lo = p->first;
    l = p;
  }
  for (auto r = std::next(it); r != ranges_.end(); ++r) {
    if (r->second.in_flight || r->first != hi) break;
    hi = r->first + r->second.length;
  }
  return ByteRun{lo, hi};
}

std::optional<uint64_t> FileCache::oldest_dirty() const {
  std::optional<uint64_t> oldest;
  for (const auto& [offset, range] : ranges_) {
    if (!range.in_flight && (!oldest || range.since < *oldest)) oldest = range.since;
  }
  return oldest;
}

bool FileCache::dirty_before(uint64_t t) {
  if (dirty_bytes_ == 0 || since_bound_ > t) return false;
  const std::optional<uint64_t> oldest = oldest_dirty();
  since_bound_ = oldest.value_or(UINT64_MAX);
  return oldest && *oldest <= t;
}

uint64_t FileCache::end() const {
  if (ranges_.empty()) return 0;
  const auto& last = *ranges_.rbegin();
  return last.first + last.second.length;
}

}  // namespace stripefs::fs
