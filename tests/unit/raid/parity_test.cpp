#include "raid/parity.hpp"

#include <gtest/gtest.h>

#include "unit/raid/test_util.hpp"

namespace stripefs {
namespace {

// GF(2^8) with polynomial 0x11d, written independently of isa-l.
uint8_t ref_mul(uint8_t a, uint8_t b) {
  uint8_t product = 0;
  while (b) {
    if (b & 1) product ^= a;
    a = static_cast<uint8_t>((a << 1) ^ ((a & 0x80) ? 0x1d : 0));
    b >>= 1;
  }
  return product;
}

uint8_t ref_pow2(unsigned e) {
  uint8_t v = 1;
  while (e--) v = ref_mul(v, 2);
  return v;
}

constexpr size_t kLength = 4096;

struct Stripe {
  unsigned k;
  unsigned parities;
  AlignedBuffer storage;
  std::vector<std::byte*> chunks;

  Stripe(unsigned data, unsigned parity_count, uint64_t seed)
      : k(data), parities(parity_count), storage(test::random_buffer((data + 2) * kLength, seed)) {
    for (unsigned i = 0; i < k + parities; ++i) chunks.push_back(storage.data() + i * kLength);
    parity::generate(std::span(chunks).subspan(0, k), chunks[k],
                     parities == 2 ? chunks[k + 1] : nullptr, kLength);
  }
};

TEST(Parity, MatchesByteLoopReference) {
  for (unsigned k = 1; k <= 12; ++k) {
    Stripe s(k, 2, k);
    for (size_t b = 0; b < kLength; ++b) {
      uint8_t p = 0, q = 0;
      for (unsigned i = 0; i < k; ++i) {
        const auto d = static_cast<uint8_t>(s.chunks[i][b]);
        p ^= d;
        q ^= ref_mul(ref_pow2(i), d);
      }
      ASSERT_EQ(static_cast<uint8_t>(s.chunks[k][b]), p) << "k=" << k << " byte " << b;
      ASSERT_EQ(static_cast<uint8_t>(s.chunks[k + 1][b]), q) << "k=" << k << " byte " << b;
    }
    Stripe r5(k, 1, k);
    EXPECT_EQ(std::memcmp(r5.chunks[k], s.chunks[k], kLength), 0);
  }
  EXPECT_EQ(parity::gf_multiply(0x53, 0xca), ref_mul(0x53, 0xca));
  EXPECT_EQ(parity::gf_power_of_two(200), ref_pow2(200));
}

TEST(Parity, Raid5RecoversEveryMember) {
  for (unsigned k = 2; k <= 8; ++k) {
    Stripe s(k, 1, 100 + k);
    for (unsigned lost = 0; lost <= k; ++lost) {
      AlignedBuffer saved(kLength);
      std::memcpy(saved.data(), s.chunks[lost], kLength);
      std::memset(s.chunks[lost], 0xee, kLength);
      unsigned missing[] = {lost};
      ASSERT_TRUE(parity::recover(s.chunks, 1, missing, kLength));
      EXPECT_EQ(std::memcmp(saved.data(), s.chunks[lost], kLength), 0)
          << "k=" << k << " lost " << lost;
    }
  }
}

TEST(Parity, Raid6RecoversEveryPair) {
  for (unsigned k = 2; k <= 10; ++k) {
    Stripe s(k, 2, 200 + k);
    const unsigned total = k + 2;
    for (unsigned a = 0; a < total; ++a) {
      for (unsigned b = a; b < total; ++b) {
        AlignedBuffer saved_a(kLength), saved_b(kLength);
        std::memcpy(saved_a.data(), s.chunks[a], kLength);
        std::memcpy(saved_b.data(), s.chunks[b], kLength);
        std::memset(s.chunks[a], 0x11, kLength);
        std::memset(s.chunks[b], 0x22, kLength);
        std::vector<unsigned> missing{a};
        if (b != a) missing.push_back(b);
        auto ok = parity::recover(s.chunks, 2, missing, kLength);
        ASSERT_TRUE(ok) << ok.error().message;
        EXPECT_EQ(std::memcmp(saved_a.data(), s.chunks[a], kLength), 0)
            << "k=" << k << " lost " << a << "," << b;
        EXPECT_EQ(std::memcmp(saved_b.data(), s.chunks[b], kLength), 0)
            << "k=" << k << " lost " << a << "," << b;
      }
    }
  }
}

// The syndromes name the one bad chunk of a RAID6 stripe, whichever it is (data, P or Q),
// and no chunk when two are bad; a stripe that is right is found so.
// The scrub's one-pass check: a stripe as generated passes; a single flipped bit in any chunk,
// data, P or Q, at the start, the middle or the last byte, fails it.
TEST(Parity, ConsistentIsTrueExactlyWhenParityMatches) {
  for (unsigned parities : {1u, 2u}) {
    for (unsigned k : {1u, 2u, 3u, 6u}) {
      Stripe stripe(k, parities, 70 + k);
      ASSERT_TRUE(parity::consistent(stripe.chunks, parities, kLength)) << k << "+" << parities;
      for (unsigned bad = 0; bad < k + parities; ++bad) {
        for (size_t at : {size_t{0}, kLength / 2, kLength - 1}) {
          stripe.chunks[bad][at] ^= std::byte{0x10};
          EXPECT_FALSE(parity::consistent(stripe.chunks, parities, kLength))
              << k << "+" << parities << " chunk " << bad << " byte " << at;
          stripe.chunks[bad][at] ^= std::byte{0x10};
        }
      }
    }
  }
}

TEST(Parity, Raid6LocatesASingleBadChunk) {
  for (unsigned k : {1u, 3u, 6u}) {
    Stripe stripe(k, 2, 40 + k);
    AlignedBuffer scratch(2 * kLength);
    auto located = parity::locate_raid6(stripe.chunks, scratch.span(), kLength);
    EXPECT_EQ(located.kind, parity::Located::Kind::consistent) << "k=" << k;
    for (unsigned bad = 0; bad < k + 2; ++bad) {
      // A run of bytes and one far from it, all flipped in some bits.
      std::byte* chunk = stripe.chunks[bad];
      for (size_t i = 100; i < 164; ++i) chunk[i] ^= std::byte{0x5a};
      chunk[3000] ^= std::byte{0x01};
      located = parity::locate_raid6(stripe.chunks, scratch.span(), kLength);
      EXPECT_EQ(located.kind, parity::Located::Kind::one) << "k=" << k << " bad=" << bad;
      EXPECT_EQ(located.index, bad) << "k=" << k;
      const unsigned other = (bad + 1) % (k + 2);
      stripe.chunks[other][2000] ^= std::byte{0x80};
      located = parity::locate_raid6(stripe.chunks, scratch.span(), kLength);
      EXPECT_EQ(located.kind, parity::Located::Kind::unknown) << "k=" << k << " bad=" << bad;
      stripe.chunks[other][2000] ^= std::byte{0x80};
      for (size_t i = 100; i < 164; ++i) chunk[i] ^= std::byte{0x5a};
      chunk[3000] ^= std::byte{0x01};
    }
  }
}

TEST(Parity, LogIsTheInverseOfPower) {
  for (unsigned e = 0; e < 255; ++e) EXPECT_EQ(parity::gf_log_two(ref_pow2(e)), e);
}

TEST(Parity, RefusesMoreLossThanParity) {
  Stripe s(4, 1, 7);
  unsigned missing[] = {0, 1};
  auto r = parity::recover(s.chunks, 1, missing, kLength);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, EIO);
}

// A read-modify-write update of P and Q equals regenerating them.
TEST(Parity, DeltaUpdateEqualsRegeneration) {
  const unsigned k = 5;
  Stripe s(k, 2, 9);
  AlignedBuffer fresh = test::random_buffer(kLength, 99);
  const unsigned changed = 3;
  AlignedBuffer delta(kLength);
  std::memcpy(delta.data(), s.chunks[changed], kLength);
  parity::xor_into(delta.data(), fresh.data(), kLength);
  parity::xor_into(s.chunks[k], delta.data(), kLength);
  parity::q_update(changed, delta.data(), s.chunks[k + 1], kLength);
  std::memcpy(s.chunks[changed], fresh.data(), kLength);
  AlignedBuffer p(kLength), q(kLength);
  parity::generate(std::span(s.chunks).subspan(0, k), p.data(), q.data(), kLength);
  EXPECT_EQ(std::memcmp(p.data(), s.chunks[k], kLength), 0);
  EXPECT_EQ(std::memcmp(q.data(), s.chunks[k + 1], kLength), 0);
}

}  // namespace
}  // namespace stripefs
