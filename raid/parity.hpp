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

// Whether P (and Q) match the data: `chunks` holds the k data chunks, P and, when
// parity_count is 2, Q, as read. One pass over them, nothing written (isa-l's xor_check,
// pq_check): what a scrub asks of every stripe.
bool consistent(std::span<std::byte* const> chunks, unsigned parity_count, size_t length);

// dest ^= src.
void xor_into(std::byte* dest, const std::byte* src, size_t length);
// q ^= g^data_index * delta: the Q update of a read-modify-write.
void q_update(unsigned data_index, const std::byte* delta, std::byte* q, size_t length);

// Rebuilds the chunks listed in `missing` in place. `chunks` holds the k data chunks in
// stripe order followed by P and, when parity_count is 2, Q. Up to parity_count chunks may
// be missing, in any combination.
Result<void> recover(std::span<std::byte* const> chunks, unsigned parity_count,
                     std::span<const unsigned> missing, size_t length);

// Which chunk of a RAID6 stripe is wrong, when one is: `chunks` holds the k data chunks,
// P and Q, all as read. The P and Q syndromes (P and Q recomputed from the data, against the
// P and Q read) name a single bad chunk exactly, as md's raid6check and btrfs's scrub use
// them: only Q differs -> Q; only P -> P; both, with Q's difference g^z times P's at every
// differing byte -> data chunk z. `scratch` is two chunks.
struct Located {
  enum class Kind : uint8_t {
    consistent,  // P and Q match the data
    one,         // exactly one chunk is wrong: `index` (k = P, k + 1 = Q)
    unknown,     // more than one chunk is wrong, or the differences agree on none
  } kind = Kind::consistent;
  unsigned index = 0;
};
Located locate_raid6(std::span<std::byte* const> chunks, std::span<std::byte> scratch,
                     size_t length);

// GF(2^8) helpers, exposed for reference tests.
uint8_t gf_multiply(uint8_t a, uint8_t b);
uint8_t gf_power_of_two(unsigned exponent);
// The exponent e with 2^e = value, for value != 0 (0..254).
unsigned gf_log_two(uint8_t value);

}  // namespace stripefs::parity
