#include "raid/stripe_io.hpp"

#include <algorithm>

#include "raid/level.hpp"
#include "raid/parity.hpp"

namespace stripefs {

bool StripeIo::failed() const {
  return !level.survives(members.active_fn());
}

std::vector<Segment> fill_gaps(const std::vector<Segment>& segments, uint64_t lo, uint64_t hi,
                               std::byte* scratch, bool include_segments) {
  std::vector<Segment> out;
  uint64_t pos = lo;
  for (const Segment& s : segments) {
    if (s.chunk_offset > pos) out.push_back({pos, s.chunk_offset - pos, scratch + (pos - lo)});
    if (include_segments) out.push_back(s);
    pos = s.chunk_offset + s.length;
  }
  if (pos < hi) out.push_back({pos, hi - pos, scratch + (pos - lo)});
  return out;
}

void generate_segmented(const std::vector<std::vector<Segment>>& sources, uint64_t lo, uint64_t hi,
                        std::byte* p, std::byte* q) {
  const size_t k = sources.size();
  std::vector<size_t> index(k, 0);
  std::vector<std::byte*> pointers(k);
  uint64_t pos = lo;
  while (pos < hi) {
    uint64_t next = hi;
    for (size_t d = 0; d < k; ++d) {
      const Segment& s = sources[d][index[d]];
      pointers[d] = s.data + (pos - s.chunk_offset);
      next = std::min(next, s.chunk_offset + s.length);
    }
    parity::generate(pointers, p + (pos - lo), q ? q + (pos - lo) : nullptr, next - pos);
    pos = next;
    for (size_t d = 0; d < k; ++d) {
      const Segment& s = sources[d][index[d]];
      if (s.chunk_offset + s.length == pos) ++index[d];
    }
  }
}

}  // namespace stripefs
