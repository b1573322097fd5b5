// Plugging the write-intent bitmap into raid/'s array lifecycle.
#pragma once

#include <chrono>

#include "raid/array.hpp"

namespace stripefs {

constexpr uint64_t kBitmapAreaOffset = 8192;  // right after the member superblock

// Gives a new array an internal bitmap: the area after the superblock (the 4 KiB header,
// then the bits in whole 4 KiB blocks), regions of `region_size` bytes of member data
// (0: default_region_size()), formatted all clear on every member before any superblock is
// written, and recorded in it (bitmap_offset, bitmap_size, bitmap_chunk). An area that does
// not fit before the members' journal area, or else the data offset, is refused (ENOSPC)
// before anything is written.
void add_bitmap(ArrayOptions& options, uint64_t region_size = 0,
                std::chrono::milliseconds clear_delay = std::chrono::milliseconds(5000));

// Opens arrays with their bitmap in use; bits are cleared after `clear_delay` idle (0: only
// when WriteIntentBitmap::clear_idle is called). Array::open calls the factory for an array
// whose superblock records a bitmap; the loaded region size must equal the superblock's
// bitmap_chunk. A bitmap that cannot be loaded is refused ("force rebuilds the bitmap"):
// the bits behind a bad header cannot be trusted. With `force`, any failure but EIO is
// repaired: a fresh, all-clear bitmap on every active member, with the superblock's region
// size, marked stale when the array is unclean (every region is then resynced, if no member
// is missing) or a member is missing (its re-add then rebuilds it whole).
void use_bitmap(OpenOptions& options,
                std::chrono::milliseconds clear_delay = std::chrono::milliseconds(5000));

}  // namespace stripefs
