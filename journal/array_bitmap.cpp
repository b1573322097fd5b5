#include "journal/array_bitmap.hpp"

#include "journal/journal_log.hpp"
#include "journal/write_intent_bitmap.hpp"

namespace stripefs {

namespace {
BitmapHeader header_for(const Superblock& sb, uint64_t region_size,
                        std::chrono::milliseconds clear_delay) {
  BitmapHeader header;
  header.array_uuid = sb.array_uuid;
  header.events = sb.events;
  header.events_cleared = sb.events;
  header.data_size = sb.data_size;
  header.region_size = region_size != 0 ? region_size : default_region_size(sb.data_size);
  header.regions = (sb.data_size + header.region_size - 1) / header.region_size;
  header.daemon_sleep_ms =
      static_cast<uint32_t>(clear_delay.count() > 0 ? clear_delay.count() : 5000);
  return header;
}
}  // namespace

void add_bitmap(ArrayOptions& options, uint64_t region_size,
                std::chrono::milliseconds clear_delay) {
  options.validate = [previous = std::move(options.validate), region_size, clear_delay](
                         std::span<Member* const> members, const Superblock& sb) -> Result<void> {
    if (previous) {
      if (auto r = previous(members, sb); !r) return r;
    }
    const BitmapHeader header = header_for(sb, region_size, clear_delay);
    const uint64_t area = kBitmapHeaderSize + bitmap_bits_bytes(header.regions);
    // The bitmap ends where the members' journal area begins, or else at the data.
    const bool journal_next = sb.journal_size != 0 && is_zero(sb.journal_device_uuid) &&
                              sb.journal_offset > kBitmapAreaOffset;
    const uint64_t limit = journal_next ? sb.journal_offset : sb.data_offset;
    if (kBitmapAreaOffset + area > limit) {
      return fail(ENOSPC,
                  "a bitmap of {} regions needs {} bytes, more than the {} before the "
                  "{}; use a larger region size",
                  header.regions, area, limit - kBitmapAreaOffset,
                  journal_next ? "journal area" : "data offset");
    }
    return {};
  };
  options.prepare = [previous = std::move(options.prepare), region_size, clear_delay](
                        std::span<Member* const> members, Superblock& sb) -> Result<void> {
    if (previous) {
      if (auto r = previous(members, sb); !r) return r;
    }
    const BitmapHeader header = header_for(sb, region_size, clear_delay);
    const uint64_t area = kBitmapHeaderSize + bitmap_bits_bytes(header.regions);
    sb.bitmap_offset = kBitmapAreaOffset;
    sb.bitmap_size = area;
    sb.bitmap_chunk = header.region_size;
    return WriteIntentBitmap::format(members, kBitmapAreaOffset, area, header);
  };
}

void use_bitmap(OpenOptions& options, std::chrono::milliseconds clear_delay) {
  options.write_intent = [clear_delay](Volume& volume, const Superblock& sb,
                                       bool force) -> Result<std::unique_ptr<WriteIntent>> {
    auto bitmap = WriteIntentBitmap::load(volume, sb.bitmap_offset, sb.bitmap_size, sb.array_uuid,
                                          sb.clean(), clear_delay);
    if (!bitmap && force && bitmap.error().code != EIO) {
      // Repair: a fresh bitmap. After an unclean shutdown nobody knows which regions were
      // being written, so it is marked stale and everything is resynced.
      journal_log().warn("{}; rebuilding the bitmap{}", bitmap.error().message,
                         sb.clean() ? "" : " (stale: full resync)");
      BitmapHeader header;
      header.array_uuid = sb.array_uuid;
      header.events = header.events_cleared = sb.events;
      header.data_size = sb.data_size;
      header.region_size = sb.bitmap_chunk;
      header.regions = (sb.data_size + sb.bitmap_chunk - 1) / sb.bitmap_chunk;
      // Untrusted after a crash; and while a member is away, the old bits were its record
      // of what it missed (a re-add then rebuilds everything).
      header.set_stale(!sb.clean() || volume.missing_members() > 0);
      std::vector<Member*> active;
      for (unsigned i = 0; i < volume.geometry().members(); ++i) {
        if (volume.member(i) != nullptr && volume.active(i)) active.push_back(volume.member(i));
      }
      if (auto f = WriteIntentBitmap::format(active, sb.bitmap_offset, sb.bitmap_size, header);
          !f) {
        return fail(f.error());
      }
      bitmap = WriteIntentBitmap::load(volume, sb.bitmap_offset, sb.bitmap_size, sb.array_uuid,
                                       sb.clean(), clear_delay);
    }
    if (!bitmap) {
      return fail(bitmap.error().code, "{} (force rebuilds the bitmap)", bitmap.error().message);
    }
    (*bitmap)->set_events(sb.events);  // clearing before the first superblock update notes it
    if ((*bitmap)->header().region_size != sb.bitmap_chunk) {
      return fail(EINVAL, "bitmap region_size {} differs from the superblock's bitmap_chunk {}",
                  (*bitmap)->header().region_size, sb.bitmap_chunk);
    }
    return std::unique_ptr<WriteIntent>(std::move(*bitmap));
  };
}

}  // namespace stripefs
