#include "raid/uuid.hpp"

#include <algorithm>
#include <random>

namespace stripefs {

Uuid generate_uuid() {
  std::random_device random;
  Uuid uuid;
  for (size_t i = 0; i < uuid.size(); i += 4) {
    const uint32_t word = random();
    for (size_t j = 0; j < 4; ++j) uuid[i + j] = static_cast<uint8_t>(word >> (8 * j));
  }
  uuid[6] = static_cast<uint8_t>((uuid[6] & 0x0F) | 0x40);  // version 4: random
  uuid[8] = static_cast<uint8_t>((uuid[8] & 0x3F) | 0x80);  // variant 1 (RFC 4122)
  return uuid;
}

namespace {

// Byte indices before which format_uuid puts a dash.
constexpr bool dash_before(size_t byte) {
  return byte == 4 || byte == 6 || byte == 8 || byte == 10;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string format_uuid(const Uuid& uuid) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string text;
  text.reserve(36);
  for (size_t i = 0; i < uuid.size(); ++i) {
    if (dash_before(i)) text.push_back('-');
    text.push_back(kDigits[uuid[i] >> 4]);
    text.push_back(kDigits[uuid[i] & 0x0F]);
  }
  return text;
}

Result<Uuid> parse_uuid(std::string_view text) {
  auto bad = [text] {
    return fail(EINVAL, "'{}' is not a UUID (expected 8-4-4-4-12 hex digits)", text);
  };
  if (text.size() != 36) return bad();
  Uuid uuid;
  size_t at = 0;
  for (size_t i = 0; i < uuid.size(); ++i) {
    if (dash_before(i) && text[at++] != '-') return bad();
    const int high = hex_value(text[at++]);
    const int low = hex_value(text[at++]);
    if (high < 0 || low < 0) return bad();
    uuid[i] = static_cast<uint8_t>(high << 4 | low);
  }
  return uuid;
}

bool is_zero(const Uuid& uuid) {
  return std::ranges::all_of(uuid, [](uint8_t b) { return b == 0; });
}

}  // namespace stripefs
