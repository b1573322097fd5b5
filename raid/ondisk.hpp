// Encoding helpers shared by every on-disk structure: explicit little-endian fields written
// byte by byte (independent of host endianness and struct layout), UUIDs, the checksum, and
// the magic-then-checksum prologue of the structures raid/ and journal/ keep on members.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "raid/result.hpp"
#include "raid/uuid.hpp"

namespace stripefs::ondisk {

template <std::unsigned_integral T>
void put_le(std::span<std::byte> out, size_t offset, T value) {
  for (size_t i = 0; i < sizeof(T); ++i) {
    out[offset + i] = static_cast<std::byte>(static_cast<uint64_t>(value) >> (8 * i));
  }
}

template <std::unsigned_integral T>
T get_le(std::span<const std::byte> in, size_t offset) {
  uint64_t value = 0;
  for (size_t i = 0; i < sizeof(T); ++i) {
    value |= std::to_integer<uint64_t>(in[offset + i]) << (8 * i);
  }
  return static_cast<T>(value);
}

template <size_t N>
void put_bytes(std::span<std::byte> out, size_t offset, const std::array<uint8_t, N>& bytes) {
  for (size_t i = 0; i < N; ++i) out[offset + i] = std::byte{bytes[i]};
}

template <size_t N>
std::array<uint8_t, N> get_bytes(std::span<const std::byte> in, size_t offset) {
  std::array<uint8_t, N> bytes;
  for (size_t i = 0; i < N; ++i) bytes[i] = std::to_integer<uint8_t>(in[offset + i]);
  return bytes;
}

inline void put_uuid(std::span<std::byte> out, size_t offset, const Uuid& uuid) {
  put_bytes(out, offset, uuid);
}
inline Uuid get_uuid(std::span<const std::byte> in, size_t offset) {
  return get_bytes<16>(in, offset);
}

// Standard CRC-32C (Castagnoli; check value 0xe3069283 for "123456789"), via isa-l.
uint32_t crc32c(std::span<const std::byte> bytes);

// A sealed structure: a 32-bit magic at `magic_at`, and at `checksum_at` the CRC-32C of every
// byte before it (the member superblock, the bitmap header, the journal superblock).
struct Sealed {
  size_t magic_at;
  uint32_t magic;
  size_t checksum_at;
};

// Stores the checksum of every byte before `checksum_at` at `checksum_at`.
void seal(std::span<std::byte> out, size_t checksum_at);

// The checksum's check alone. EUCLEAN "WHERE: WHAT checksum mismatch (stored 0x..., computed
// 0x...)"; `what` may be empty.
Result<void> check_checksum(std::span<const std::byte> in, size_t checksum_at,
                            std::string_view where, std::string_view what);

// The magic first, so a structure that was never ours is told apart from a damaged one:
// ENODATA "WHERE: WHAT magic 0x... is not 0x... (no stripefs WHAT)"; then the checksum, as
// check_checksum. `where` names the place ("member /dev/sdb"), `what` the structure
// ("superblock").
Result<void> check_sealed(std::span<const std::byte> in, const Sealed& layout,
                          std::string_view where, std::string_view what);

}  // namespace stripefs::ondisk
