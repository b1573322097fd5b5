// UUIDs: of arrays, members and filesystems (RFC 4122, version 4).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "raid/result.hpp"

namespace stripefs {

using Uuid = std::array<uint8_t, 16>;

Uuid generate_uuid();                       // random (version 4) UUID from std::random_device
std::string format_uuid(const Uuid& uuid);  // 8-4-4-4-12 lowercase hex
// Accepts format_uuid's form, hex digits in either case. The error names the text.
Result<Uuid> parse_uuid(std::string_view text);
bool is_zero(const Uuid& uuid);

}  // namespace stripefs
