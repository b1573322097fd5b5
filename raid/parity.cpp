#include "raid/parity.hpp"

#include <isa-l/erasure_code.h>
#include <isa-l/raid.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

namespace stripefs::parity {

namespace {
// Data chunks of the widest stripe (64 members) plus P and Q.
constexpr size_t kMaxVectors = 66;
}  // namespace

uint8_t gf_multiply(uint8_t a, uint8_t b) {
  return gf_mul(a, b);
}

uint8_t gf_power_of_two(unsigned exponent) {
  uint8_t value = 1;
  for (unsigned i = 0; i < exponent; ++i) value = gf_mul(value, 2);
  return value;
}

unsigned gf_log_two(uint8_t value) {
  static const std::array<uint8_t, 256> logs = [] {
    std::array<uint8_t, 256> table{};
    uint8_t power = 1;
    for (unsigned e = 0; e < 255; ++e) {
      table[power] = static_cast<uint8_t>(e);
      power = gf_mul(power, 2);
    }
    return table;
  }();
  return logs[value];
}

Located locate_raid6(std::span<std::byte* const> chunks, std::span<std::byte> scratch,
                     size_t length) {
  const size_t k = chunks.size() - 2;
  std::byte* p = scratch.data();
  std::byte* q = scratch.data() + length;
  generate(chunks.first(k), p, q, length);
  // The syndromes: what P and Q read differ by from P and Q of the data read.
  xor_into(p, chunks[k], length);
  xor_into(q, chunks[k + 1], length);
  Located found;
  for (size_t i = 0; i < length; ++i) {
    const auto pd = static_cast<uint8_t>(p[i]), qd = static_cast<uint8_t>(q[i]);
    if (pd == 0 && qd == 0) continue;
    unsigned culprit;
    if (pd == 0) {
      culprit = static_cast<unsigned>(k + 1);  // Q alone
    } else if (qd == 0) {
      culprit = static_cast<unsigned>(k);  // P alone
    } else {
      // D_z off by e: P off by e, Q by g^z * e.
      culprit = (gf_log_two(qd) + 255 - gf_log_two(pd)) % 255;
      if (culprit >= k) return {Located::Kind::unknown, 0};
    }
    if (found.kind == Located::Kind::one && found.index != culprit) {
      return {Located::Kind::unknown, 0};
    }
    found = {Located::Kind::one, culprit};
  }
  return found;
}

void generate(std::span<std::byte* const> data, std::byte* p, std::byte* q, size_t length) {
  if (data.size() == 1) {
    // isa-l needs two sources; with one, P = Q = D (g^0 = 1).
    std::copy_n(data[0], length, p);
    if (q != nullptr) std::copy_n(data[0], length, q);
    return;
  }
  // Called per stripe segment on the write path: no allocation.
  std::array<void*, kMaxVectors> vectors;
  const size_t k = std::min(data.size(), kMaxVectors - 2);
  std::copy_n(data.begin(), k, vectors.begin());
  vectors[k] = p;
  if (q == nullptr) {
    xor_gen(static_cast<int>(k + 1), static_cast<int>(length), vectors.data());
    return;
  }
  vectors[k + 1] = q;
  pq_gen(static_cast<int>(k + 2), static_cast<int>(length), vectors.data());
}

bool consistent(std::span<std::byte* const> chunks, unsigned parity_count, size_t length) {
  const size_t k = chunks.size() - parity_count;
  if (k < 2) {
    // isa-l needs two sources: with one, P = Q = D.
    for (size_t i = k; i < chunks.size(); ++i) {
      if (std::memcmp(chunks[i], chunks[0], length) != 0) return false;
    }
    return true;
  }
  std::array<void*, kMaxVectors> vectors;
  std::copy_n(chunks.begin(), chunks.size(), vectors.begin());
  const int n = static_cast<int>(chunks.size());
  return (parity_count == 2 ? pq_check(n, static_cast<int>(length), vectors.data())
                            : xor_check(n, static_cast<int>(length), vectors.data())) == 0;
}

void xor_into(std::byte* dest, const std::byte* src, size_t length) {
  // Element-wise, so the destination may also be a source.
  void* vectors[3] = {dest, const_cast<std::byte*>(src), dest};
  xor_gen(3, static_cast<int>(length), vectors);
}

void q_update(unsigned data_index, const std::byte* delta, std::byte* q, size_t length) {
  unsigned char table[32];
  gf_vect_mul_init(gf_power_of_two(data_index), table);
  gf_vect_mad(static_cast<int>(length), 1, 0, table,
              reinterpret_cast<unsigned char*>(const_cast<std::byte*>(delta)),
              reinterpret_cast<unsigned char*>(q));
}

Result<void> recover(std::span<std::byte* const> chunks, unsigned parity_count,
                     std::span<const unsigned> missing, size_t length) {
  const unsigned total = static_cast<unsigned>(chunks.size());
  if (parity_count == 0 || parity_count > 2 || total <= parity_count) {
    return fail(EINVAL, "recover: {} chunks with {} parity is not a parity stripe", total,
                parity_count);
  }
  const unsigned k = total - parity_count;
  if (missing.size() > parity_count) {
    return fail(EIO, "{} chunks of a stripe are missing; parity covers {}", missing.size(),
                parity_count);
  }
  if (missing.empty()) return {};
  std::vector<bool> lost(total, false);
  for (unsigned m : missing) {
    if (m >= total) return fail(EINVAL, "recover: chunk {} out of range", m);
    lost[m] = true;
  }
  std::vector<unsigned> lost_data;
  for (unsigned i = 0; i < k; ++i) {
    if (lost[i]) lost_data.push_back(i);
  }
  const bool lost_p = lost[k];
  const bool lost_q = parity_count == 2 && lost[k + 1];

  if (!lost_data.empty()) {
    if (lost_data.size() == 1 && !lost_p) {
      // One data chunk and P available: XOR of P and the other data chunks.
      std::vector<void*> vectors;
      for (unsigned i = 0; i < k; ++i) {
        if (i != lost_data[0]) vectors.push_back(chunks[i]);
      }
      vectors.push_back(chunks[k]);
      vectors.push_back(chunks[lost_data[0]]);
      if (vectors.size() == 2) {
        std::copy_n(static_cast<std::byte*>(vectors[0]), length, chunks[lost_data[0]]);
      } else {
        xor_gen(static_cast<int>(vectors.size()), static_cast<int>(length), vectors.data());
      }
    } else {
      // General case: invert the rows of the generator matrix that survived (identity for
      // data, all ones for P, g^i for Q) and solve for the lost data chunks.
      std::vector<unsigned> survivors;
      for (unsigned i = 0; i < k + parity_count && survivors.size() < k; ++i) {
        if (!lost[i]) survivors.push_back(i);
      }
      std::vector<uint8_t> matrix(k * k, 0), inverse(k * k, 0);
      for (unsigned r = 0; r < k; ++r) {
        const unsigned row = survivors[r];
        for (unsigned c = 0; c < k; ++c) {
          uint8_t value;
          if (row < k)
            value = row == c ? 1 : 0;
          else if (row == k)
            value = 1;
          else
            value = gf_power_of_two(c);
          matrix[r * k + c] = value;
        }
      }
      if (gf_invert_matrix(matrix.data(), inverse.data(), static_cast<int>(k)) != 0) {
        return fail(EIO, "recover: singular decode matrix");
      }
      const unsigned rows = static_cast<unsigned>(lost_data.size());
      std::vector<uint8_t> decode(rows * k);
      for (unsigned r = 0; r < rows; ++r) {
        std::copy_n(&inverse[lost_data[r] * k], k, &decode[r * k]);
      }
      std::vector<uint8_t> tables(32 * k * rows);
      ec_init_tables(static_cast<int>(k), static_cast<int>(rows), decode.data(), tables.data());
      std::vector<unsigned char*> sources, outputs;
      for (unsigned s : survivors) sources.push_back(reinterpret_cast<unsigned char*>(chunks[s]));
      for (unsigned d : lost_data) outputs.push_back(reinterpret_cast<unsigned char*>(chunks[d]));
      ec_encode_data(static_cast<int>(length), static_cast<int>(k), static_cast<int>(rows),
                     tables.data(), sources.data(), outputs.data());
    }
  }
  if (lost_p || lost_q) {
    // Data is complete now: regenerate the lost parity.
    std::byte* p = chunks[k];
    std::byte* q = parity_count == 2 ? chunks[k + 1] : nullptr;
    if (parity_count == 2 && !lost_p) {
      // pq_gen writes both; keep the surviving P intact by generating into a scratch copy.
      std::vector<std::byte> tmp_storage(length + 32);
      auto* tmp = reinterpret_cast<std::byte*>(
          (reinterpret_cast<uintptr_t>(tmp_storage.data()) + 31) & ~uintptr_t{31});
      generate(chunks.subspan(0, k), tmp, q, length);
      return {};
    }
    if (parity_count == 2 && !lost_q) {
      std::vector<std::byte> tmp_storage(length + 32);
      auto* tmp = reinterpret_cast<std::byte*>(
          (reinterpret_cast<uintptr_t>(tmp_storage.data()) + 31) & ~uintptr_t{31});
      generate(chunks.subspan(0, k), p, tmp, length);
      return {};
    }
    generate(chunks.subspan(0, k), p, q, length);
  }
  return {};
}

}  // namespace stripefs::parity
