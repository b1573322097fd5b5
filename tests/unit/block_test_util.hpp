// Helpers for the tests of every 4 KiB on-disk block (member superblock, bitmap header,
// journal blocks): field access, an independent checksum, and the damage table's row type.
#pragma once

#include <isa-l/crc.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>

namespace stripefs::test {

using Block4K = std::array<std::byte, 4096>;
constexpr size_t kBlockChecksum = 4092;  // every block's CRC-32C sits in its last 4 bytes

template <class T>
void put(Block4K& block, size_t offset, T value) {
  for (size_t i = 0; i < sizeof(T); ++i) {
    block[offset + i] = static_cast<std::byte>(static_cast<uint64_t>(value) >> (8 * i));
  }
}

template <class T>
T get(const Block4K& block, size_t offset) {
  uint64_t value = 0;
  for (size_t i = 0; i < sizeof(T); ++i) {
    value |= std::to_integer<uint64_t>(block[offset + i]) << (8 * i);
  }
  return static_cast<T>(value);
}

// Writes `value` as a field `width` bytes wide; false for a width no field has.
inline bool put_width(Block4K& block, size_t offset, size_t width, uint64_t value) {
  switch (width) {
    case 1:
      put(block, offset, static_cast<uint8_t>(value));
      return true;
    case 2:
      put(block, offset, static_cast<uint16_t>(value));
      return true;
    case 4:
      put(block, offset, static_cast<uint32_t>(value));
      return true;
    case 8:
      put(block, offset, value);
      return true;
    default:
      return false;
  }
}

// The documented checksum, computed independently of the codecs: standard CRC-32C.
inline uint32_t crc32c(const std::byte* bytes, size_t size) {
  auto* data = reinterpret_cast<unsigned char*>(const_cast<std::byte*>(bytes));
  return ~crc32_iscsi(data, static_cast<int>(size), 0xFFFFFFFFu);
}
inline uint32_t crc32c(const Block4K& block) {
  return crc32c(block.data(), kBlockChecksum);
}

// Makes the checksum match again, so the semantic checks are what a test exercises.
inline void reseal(Block4K& block) {
  put(block, kBlockChecksum, crc32c(block));
}

// One kind of semantic damage: a field overwritten with a bad value, checksum recomputed.
struct Damage {
  std::string name;
  size_t offset;
  size_t width;  // bytes
  uint64_t value;
  int code;
  std::string reason;  // must appear in the message
  std::string shown;   // the field and its bad value, as the message shows them
};

inline void PrintTo(const Damage& d, std::ostream* os) {
  *os << d.name;
}

}  // namespace stripefs::test
