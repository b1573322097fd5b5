// Plugging the write-intent bitmap into raid/'s array lifecycle.
#pragma once

#include <chrono>

#include "raid/array.hpp"

namespace stripefs {

constexpr uint64_t kBitmapAreaOffset = 8192;  // right after the member superblock

// Gives a new array an internal bitmap: the area after the superblock, regions of
// `region_size` bytes of member data (0: default_region_size()), formatted on every member
// before any superblock is written.
void add_bitmap(ArrayOptions& options, uint64_t region_size = 0,
                std::chrono::milliseconds clear_delay = std::chrono::milliseconds(5000));

// Opens arrays with their bitmap in use; bits are cleared after `clear_delay` idle (0: only
// when WriteIntentBitmap::clear_idle is called).
void use_bitmap(OpenOptions& options,
                std::chrono::milliseconds clear_delay = std::chrono::milliseconds(5000));

}  // namespace stripefs
