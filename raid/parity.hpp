// RAID5/6 parity on isa-l: P is the XOR of the data chunks, Q the Reed-Solomon syndrome
// sum(g^i * D_i) over GF(2^8) with generator g = 2 and polynomial 0x11d (md's RAID6 Q).
//
// All pointers must be 32-byte aligned and lengths multiples of 32 (isa-l's SIMD contract);
// the Volume guarantees it by requiring sector-aligned buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "raid/result.hpp"

namespace stripefs::parity {

// P (and Q when q != nullptr) of data[0..k).
void generate(std::span<std::byte* const> data, std::byte* p, std::byte* q, size_t length);

// dest ^= src.
void xor_into(std::byte* dest, const std::byte* src, size_t length);
// q ^= g^data_index * delta: the Q update of a read-modify-write.
void q_update(unsigned data_index, const std::byte* delta, std::byte* q, size_t length);

// Rebuilds the chunks listed in `missing` in place. `chunks` holds the k data chunks in
// stripe order followed by P and, when parity_count is 2, Q. Up to parity_count chunks may
// be missing, in any combination.
Result<void> recover(std::span<std::byte* const> chunks, unsigned parity_count,
                     std::span<const unsigned> missing, size_t length);

// GF(2^8) helpers, exposed for reference tests.
uint8_t gf_multiply(uint8_t a, uint8_t b);
uint8_t gf_power_of_two(unsigned exponent);

}  // namespace stripefs::parity
