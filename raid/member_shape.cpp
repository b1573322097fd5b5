#include "raid/member_shape.hpp"

#include <bit>

#include "raid/member.hpp"

namespace stripefs {

unsigned size_bucket(uint64_t bytes) {
  if (bytes <= 4096) return 0;
  // 4097..8192 -> 1, ..., up to 1 MiB -> 8; larger -> 9.
  const unsigned log = static_cast<unsigned>(std::bit_width(bytes - 1));  // ceil(log2)
  return log > 20 ? kSizeBuckets - 1 : log - 12;
}

const char* size_bucket_name(unsigned bucket) {
  static constexpr const char* kNames[kSizeBuckets] = {"4K",   "8K",   "16K",  "32K", "64K",
                                                       "128K", "256K", "512K", "1M",  ">1M"};
  return bucket < kSizeBuckets ? kNames[bucket] : "?";
}

Alignment alignment_of(uint64_t offset, uint64_t length, uint64_t unit) {
  if (unit == 0 || length == 0) return Alignment::within;
  if (offset % unit == 0 && length % unit == 0) return Alignment::aligned;
  return offset / unit == (offset + length - 1) / unit ? Alignment::within : Alignment::straddling;
}

void MemberShapeCounters::note(MemberOp op, uint64_t offset, uint64_t length, uint32_t merged,
                               bool fua, uint64_t unit) {
  constexpr auto relaxed = std::memory_order_relaxed;
  if (op == MemberOp::flush) {
    flushes_.fetch_add(1, relaxed);
    return;
  }
  Direction& d = op == MemberOp::read ? read_ : write_;
  d.requests.fetch_add(1, relaxed);
  d.bytes.fetch_add(length, relaxed);
  d.sizes[size_bucket(length)].fetch_add(1, relaxed);
  if (merged > 1) {
    d.merged.fetch_add(1, relaxed);
    d.merged_ios.fetch_add(merged, relaxed);
  }
  switch (alignment_of(offset, length, unit)) {
    case Alignment::aligned:
      d.aligned.fetch_add(1, relaxed);
      break;
    case Alignment::straddling:
      d.straddling.fetch_add(1, relaxed);
      break;
    case Alignment::within:
      break;
  }
  if (fua && op == MemberOp::write) fua_writes_.fetch_add(1, relaxed);
}

MemberShape MemberShapeCounters::snapshot() const {
  constexpr auto relaxed = std::memory_order_relaxed;
  MemberShape out;
  for (auto [from, to] : {std::pair{&read_, &out.read}, std::pair{&write_, &out.write}}) {
    to->requests = from->requests.load(relaxed);
    to->bytes = from->bytes.load(relaxed);
    to->merged = from->merged.load(relaxed);
    to->merged_ios = from->merged_ios.load(relaxed);
    to->aligned = from->aligned.load(relaxed);
    to->straddling = from->straddling.load(relaxed);
    for (unsigned b = 0; b < kSizeBuckets; ++b) to->sizes[b] = from->sizes[b].load(relaxed);
  }
  out.fua_writes = fua_writes_.load(relaxed);
  out.flushes = flushes_.load(relaxed);
  return out;
}

}  // namespace stripefs
