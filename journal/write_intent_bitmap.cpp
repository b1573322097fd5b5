#include "journal/write_intent_bitmap.hpp"

#include <algorithm>
#include <cstring>
#include <future>

#include "journal/journal_log.hpp"
#include "raid/io_batch.hpp"

namespace stripefs {

struct WriteIntentBitmap::Batch {
  std::vector<std::pair<uint64_t, AlignedBuffer>> units;  // area offset, snapshot
  std::vector<uint64_t> regions;                          // set by this batch
  std::vector<std::function<void()>> waiters;
};

namespace {

std::vector<Member*> members_of(Volume& volume) {
  std::vector<Member*> out;
  for (unsigned i = 0; i < volume.geometry().members(); ++i) out.push_back(volume.member(i));
  return out;
}

}  // namespace

Result<void> WriteIntentBitmap::format(std::span<Member* const> members, uint64_t area_offset,
                                       uint64_t area_size, const BitmapHeader& header) {
  for (Member* m : members) {
    if (auto fits = check_bitmap_fits(header, area_size, m->name()); !fits) return fits;
  }
  AlignedBuffer zeros(area_size - kBitmapHeaderSize);
  zeros.zero();
  for (Member* m : members) {
    if (zeros.size() > 0) {
      if (auto w = member_write(*m, area_offset + kBitmapHeaderSize, zeros.span(), true); !w) {
        return w;
      }
    }
    if (auto w = write_bitmap_header(*m, area_offset, header); !w) return w;
  }
  return {};
}

Result<std::unique_ptr<WriteIntentBitmap>> WriteIntentBitmap::load(
    Volume& volume, uint64_t area_offset, uint64_t area_size, const Uuid& array_uuid, bool clean,
    std::chrono::milliseconds clear_delay) {
  std::optional<BitmapHeader> header;
  AlignedBuffer image(area_size);
  image.zero();
  AlignedBuffer bits(area_size);
  uint64_t unit = 0;
  for (unsigned i = 0; i < volume.geometry().members(); ++i) {
    Member* m = volume.member(i);
    if (m == nullptr || !volume.active(i)) continue;
    // A damaged header is refused, not guessed at: the bits behind it cannot be trusted.
    auto h = read_bitmap_header(*m, area_offset, array_uuid);
    if (!h) return fail(h.error());
    if (auto fits = check_bitmap_fits(*h, area_size, m->name()); !fits) return fail(fits.error());
    if (!header) {
      header = *h;
    } else if (h->region_size != header->region_size || h->regions != header->regions) {
      return fail(EINVAL,
                  "member {}: bitmap region_size {} / regions {} differ from the other "
                  "members' {} / {}",
                  m->name(), h->region_size, h->regions, header->region_size, header->regions);
    }
    if (auto r = member_read(*m, area_offset, bits.span()); !r) return fail(r.error());
    for (uint64_t b = kBitmapHeaderSize; b < area_size; ++b) image.data()[b] |= bits.data()[b];
    unit = std::max<uint64_t>(unit,
                              std::max(preferred_io_size(m->limits()), m->limits().logical_block));
  }
  if (!header) return fail(ENODEV, "no active member to read the bitmap from");
  encode_bitmap_header(*header, image.span().subspan<0, kBitmapHeaderSize>());
  std::unique_ptr<WriteIntentBitmap> bitmap(new WriteIntentBitmap(
      volume, area_offset, area_size, *header, std::move(image), unit, clean));
  if (clear_delay.count() > 0) {
    bitmap->cleaner_ =
        std::thread([raw = bitmap.get(), clear_delay] { raw->cleaner_loop(clear_delay); });
  }
  return bitmap;
}

WriteIntentBitmap::WriteIntentBitmap(Volume& volume, uint64_t area_offset, uint64_t area_size,
                                     BitmapHeader header, AlignedBuffer image, uint64_t unit,
                                     bool clean)
    : volume_(volume),
      area_offset_(area_offset),
      area_size_(area_size),
      header_(header),
      unit_(unit),
      image_(std::move(image)),
      regions_(header.regions) {
  const bool all = !clean && header_.stale();  // untrusted: everything needs a resync
  const auto now = std::chrono::steady_clock::now();
  for (uint64_t r = 0; r < regions_.size(); ++r) {
    const auto byte = static_cast<uint8_t>(image_.data()[kBitmapHeaderSize + r / 8]);
    if (!all && !((byte >> (r % 8)) & 1)) continue;
    regions_[r].state = clean ? RegionState::dirty : RegionState::needs_resync;
    regions_[r].idle_since = now;
  }
}

WriteIntentBitmap::~WriteIntentBitmap() {
  {
    std::lock_guard lock(cleaner_mutex_);
    stopping_ = true;
  }
  cleaner_cv_.notify_all();
  if (cleaner_.joinable()) cleaner_.join();
  settle();
}

void WriteIntentBitmap::set_bit(uint64_t region, bool value) {
  auto& byte = image_.data()[kBitmapHeaderSize + region / 8];
  const auto mask = std::byte(1u << (region % 8));
  byte = value ? byte | mask : byte & ~mask;
  pending_units_.insert(unit_of(region));
}

// The aligned unit holding the region's bit, as an area offset. Units are aligned in member
// offsets, so the first and last of the area may be cut short by its edges.
uint64_t WriteIntentBitmap::unit_of(uint64_t region) const {
  const uint64_t at = area_offset_ + kBitmapHeaderSize + region / 8;
  return std::max(at / unit_ * unit_, area_offset_) - area_offset_;
}

void WriteIntentBitmap::begin_write(uint64_t begin, uint64_t end, std::function<void()> ready) {
  const uint64_t first = begin / header_.region_size;
  const uint64_t last = std::min<uint64_t>((end - 1) / header_.region_size, regions_.size() - 1);
  std::unique_ptr<Batch> batch;
  {
    std::lock_guard lock(mutex_);
    bool wait = false;
    for (uint64_t r = first; r <= last; ++r) {
      Region& region = regions_[r];
      ++region.writers;
      if (region.state == RegionState::clean) {
        region.state = RegionState::setting;
        set_bit(r, true);
        pending_regions_.push_back(r);
        ++stats_.bits_set;
        wait = true;
      } else if (region.state == RegionState::setting) {
        wait = true;  // its bit is on its way to disk: wait for that batch (or a later one)
      }
    }
    if (wait) {
      pending_waiters_.push_back(std::move(ready));
      batch = take_batch_locked();
    } else {
      ++stats_.ready_at_once;
    }
  }
  if (batch) {
    submit_batch(std::move(batch));
  } else if (ready) {
    ready();
  }
}

void WriteIntentBitmap::end_write(uint64_t begin, uint64_t end) {
  const uint64_t first = begin / header_.region_size;
  const uint64_t last = std::min<uint64_t>((end - 1) / header_.region_size, regions_.size() - 1);
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(mutex_);
  for (uint64_t r = first; r <= last; ++r) {
    if (--regions_[r].writers == 0) regions_[r].idle_since = now;
  }
}

std::vector<std::pair<uint64_t, uint64_t>> WriteIntentBitmap::ranges_locked(
    const std::function<bool(const Region&)>& wanted) const {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (uint64_t r = 0; r < regions_.size(); ++r) {
    if (!wanted(regions_[r])) continue;
    const uint64_t begin = r * header_.region_size;
    const uint64_t end = std::min(begin + header_.region_size, header_.data_size);
    if (!out.empty() && out.back().second == begin) {
      out.back().second = end;
    } else {
      out.emplace_back(begin, end);
    }
  }
  return out;
}

std::vector<std::pair<uint64_t, uint64_t>> WriteIntentBitmap::ranges_to_resync() const {
  std::lock_guard lock(mutex_);
  return ranges_locked([](const Region& r) { return r.state == RegionState::needs_resync; });
}

std::vector<std::pair<uint64_t, uint64_t>> WriteIntentBitmap::ranges_missed_since(
    uint64_t events) const {
  std::lock_guard lock(mutex_);
  // Bits cleared after the member left no longer show what it missed.
  const bool everything = header_.stale() || events < header_.events_cleared;
  return ranges_locked(
      [everything](const Region& r) { return everything || r.state != RegionState::clean; });
}

Result<void> WriteIntentBitmap::member_returned(Member& member) {
  settle();  // bits on their way to the others are in the image already
  AlignedBuffer copy(area_size_);
  {
    std::lock_guard lock(mutex_);
    std::memcpy(copy.data(), image_.data(), area_size_);
  }
  return member_write(member, area_offset_, copy.span(), /*fua=*/true);
}

void WriteIntentBitmap::resynced(uint64_t begin, uint64_t end) {
  const uint64_t first = begin / header_.region_size;
  const uint64_t last = std::min<uint64_t>((end - 1) / header_.region_size, regions_.size() - 1);
  const auto now = std::chrono::steady_clock::now();
  std::unique_ptr<Batch> batch;
  {
    std::lock_guard lock(mutex_);
    for (uint64_t r = first; r <= last; ++r) {
      if (regions_[r].state != RegionState::needs_resync) continue;
      regions_[r].state = RegionState::dirty;  // clearable once idle
      regions_[r].idle_since = now;
    }
    const bool all_resynced = std::none_of(regions_.begin(), regions_.end(), [](const Region& x) {
      return x.state == RegionState::needs_resync;
    });
    // A stale bitmap records nothing a missing member missed: it stays stale (its return is
    // then a whole rebuild) until every member is back, even when the resync is done.
    if (header_.stale() && all_resynced && volume_.missing_members() == 0) {
      // Everything was resynced: the bits are trustworthy again.
      header_.set_stale(false);
      encode_bitmap_header(header_, image_.span().subspan<0, kBitmapHeaderSize>());
      header_pending_ = true;
      batch = take_batch_locked();
    }
  }
  if (batch) submit_batch(std::move(batch));
}

BitmapHeader WriteIntentBitmap::header() const {
  std::lock_guard lock(mutex_);
  return header_;
}

std::unique_ptr<WriteIntentBitmap::Batch> WriteIntentBitmap::take_batch_locked() {
  if (in_flight_) return nullptr;  // the batch in flight hands over when it completes
  if (pending_units_.empty() && pending_waiters_.empty() && !header_pending_) return nullptr;
  auto batch = std::make_unique<Batch>();
  if (header_pending_) {
    // The header is checksummed as a whole: it goes out whole, whatever the unit size.
    AlignedBuffer snapshot(kBitmapHeaderSize);
    std::memcpy(snapshot.data(), image_.data(), kBitmapHeaderSize);
    batch->units.emplace_back(0, std::move(snapshot));
    header_pending_ = false;
  }
  for (uint64_t unit : pending_units_) {
    const uint64_t length = std::min(unit_ - (area_offset_ + unit) % unit_, area_size_ - unit);
    AlignedBuffer snapshot(length);
    std::memcpy(snapshot.data(), image_.data() + unit, length);
    batch->units.emplace_back(unit, std::move(snapshot));
  }
  pending_units_.clear();
  batch->regions = std::exchange(pending_regions_, {});
  batch->waiters = std::exchange(pending_waiters_, {});
  in_flight_ = true;
  ++stats_.batches;
  return batch;
}

void WriteIntentBitmap::submit_batch(std::unique_ptr<Batch> batch) {
  std::vector<PlannedIo> ios;
  for (unsigned m = 0; m < volume_.geometry().members(); ++m) {
    if (volume_.member(m) == nullptr || !volume_.active(m)) continue;
    for (auto& [unit, snapshot] : batch->units) {
      ios.push_back({m, area_offset_ + unit, snapshot.data(), snapshot.size(), 0});
    }
  }
  // FUA: the bit must be durable before the data write it guards goes out.
  auto raw = batch.release();
  submit_ios(members_of(volume_), MemberOp::write, std::move(ios), /*fua=*/true,
             [this, raw](std::vector<FailedIo> failures) {
               for (const FailedIo& f : failures) {
                 volume_.fail_member(f.member, Error{f.error, "bitmap write failed"});
               }
               batch_done(std::unique_ptr<Batch>(raw));
             });
}

void WriteIntentBitmap::batch_done(std::unique_ptr<Batch> batch) {
  std::unique_ptr<Batch> next;
  {
    std::lock_guard lock(mutex_);
    for (uint64_t r : batch->regions) {
      if (regions_[r].state == RegionState::setting) regions_[r].state = RegionState::dirty;
    }
    in_flight_ = false;
    next = take_batch_locked();
    if (!next) settled_.notify_all();
  }
  for (auto& waiter : batch->waiters) {
    if (waiter) waiter();
  }
  if (next) submit_batch(std::move(next));
}

void WriteIntentBitmap::settle() {
  std::unique_lock lock(mutex_);
  settled_.wait(lock, [this] { return !in_flight_ && pending_units_.empty() && !header_pending_; });
}

Result<uint64_t> WriteIntentBitmap::clear_idle(std::chrono::milliseconds idle) {
  // While a member is missing, the bits are the record of what it missed: a member that
  // comes back needs exactly those regions resynced (md keeps them too).
  if (volume_.missing_members() > 0) return 0;
  const auto now = std::chrono::steady_clock::now();
  auto idle_enough = [&](const Region& r) {
    return r.state == RegionState::dirty && r.writers == 0 && now - r.idle_since >= idle;
  };
  std::vector<std::pair<uint64_t, std::chrono::steady_clock::time_point>> candidates;
  {
    std::lock_guard lock(mutex_);
    for (uint64_t r = 0; r < regions_.size(); ++r) {
      if (idle_enough(regions_[r])) candidates.emplace_back(r, regions_[r].idle_since);
    }
  }
  if (candidates.empty()) return 0;
  // The writes these bits guard must be durable before the bits go.
  if (auto f = volume_.flush(); !f) return fail(f.error());
  uint64_t cleared = 0;
  std::unique_ptr<Batch> batch;
  {
    std::lock_guard lock(mutex_);
    for (auto [r, since] : candidates) {
      Region& region = regions_[r];
      // Written again meanwhile: keep it.
      if (region.state != RegionState::dirty || region.writers != 0 || region.idle_since != since) {
        continue;
      }
      region.state = RegionState::clean;
      set_bit(r, false);
      ++cleared;
    }
    stats_.bits_cleared += cleared;
    const uint64_t events = events_.load();
    if (cleared > 0 && events > header_.events_cleared) {
      // A member away since before now cannot trust these bits: recorded with them.
      header_.events_cleared = events;
      encode_bitmap_header(header_, image_.span().subspan<0, kBitmapHeaderSize>());
      header_pending_ = true;
    }
    batch = take_batch_locked();
  }
  if (batch) submit_batch(std::move(batch));
  settle();
  return cleared;
}

void WriteIntentBitmap::cleaner_loop(std::chrono::milliseconds delay) {
  std::unique_lock lock(cleaner_mutex_);
  while (!stopping_) {
    cleaner_cv_.wait_for(lock, delay / 2, [this] { return stopping_; });
    if (stopping_) break;
    lock.unlock();
    if (auto r = clear_idle(delay); !r) {
      journal_log().warn("bitmap: clearing idle regions: {}", r.error().message);
    }
    lock.lock();
  }
}

uint64_t WriteIntentBitmap::dirty_regions() const {
  std::lock_guard lock(mutex_);
  return static_cast<uint64_t>(std::count_if(regions_.begin(), regions_.end(), [](const Region& r) {
    return r.state != RegionState::clean;
  }));
}

BitmapStats WriteIntentBitmap::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace stripefs
