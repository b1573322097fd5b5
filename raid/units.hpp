// Sizes as people type them ("64K", "1.5G", "4096") and as we print them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "raid/result.hpp"

namespace stripefs {

// Binary units: K, M, G, T (optionally followed by "iB" or "B"), case-insensitive.
Result<uint64_t> parse_size(std::string_view text);
std::string format_size(uint64_t bytes);

}  // namespace stripefs
