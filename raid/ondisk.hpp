// Encoding helpers shared by every on-disk structure: explicit little-endian fields written
// byte by byte (independent of host endianness and struct layout), and the checksum.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>

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

// Standard CRC-32C (Castagnoli; check value 0xe3069283 for "123456789"), via isa-l.
uint32_t crc32c(std::span<const std::byte> bytes);

}  // namespace stripefs::ondisk
