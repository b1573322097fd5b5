#include "fs/core/extent_tree.hpp"

#include <algorithm>
#include <bit>

namespace stripefs::fs {

namespace {

// The 128-bit product of two words, folded to 64 bits (wyhash's mixing step): one
// multiply moves every input bit into many output bits.
__extension__ typedef unsigned __int128 Product;  // GCC's and Clang's, on 64-bit targets
uint64_t mum(uint64_t a, uint64_t b) {
  const Product r = static_cast<Product>(a) * b;
  return static_cast<uint64_t>(r) ^ static_cast<uint64_t>(r >> 64);
}

constexpr uint64_t kSecret[6] = {0xa0761d6478bd642fULL, 0xe7037ed1a0b428dbULL,
                                 0x8ebc6af09c88c6e3ULL, 0x589965cc75374cc3ULL,
                                 0x1d8e4e27c47d124fULL, 0x9e3779b97f4a7c15ULL};

// Leaves a split or a rebuild fills: a packed tree's are full, a split's three quarters
// full, so that the next few extents a random write adds do not split them again at once.
constexpr size_t kSplitLeafExtents = kLeafExtents * 3 / 4;

}  // namespace

ExtentTree::Fingerprint ExtentTree::fingerprint(std::span<const Extent> extents) {
  // Two lanes of 64 bits, each fed every field: a changed leaf that kept its fingerprint
  // would not be written. Not cryptographic (nobody chooses volume blocks to collide), but
  // a chance change must not collide in practice. It is on a commit's path (every leaf of a
  // changed file), so it costs two multiplies an extent.
  uint64_t a = mum(extents.size() ^ kSecret[0], kSecret[1]);
  uint64_t b = mum(extents.size() ^ kSecret[2], kSecret[3]);
  for (const Extent& e : extents) {
    const uint64_t length = (uint64_t{e.length} << 1) | (e.unwritten ? 1 : 0);
    a = mum(a ^ e.logical ^ kSecret[0], e.physical ^ (length << 40) ^ kSecret[1]);
    b = mum(b ^ std::rotl(e.physical, 23) ^ length ^ kSecret[2],
            std::rotl(e.logical, 41) ^ kSecret[3]);
  }
  return {mum(a ^ kSecret[4], b ^ kSecret[5]), mum(b ^ kSecret[4], a ^ kSecret[1])};
}

void ExtentTree::add_leaf(uint64_t block, std::span<const Extent> extents) {
  // Never empty (the decoder refuses a leaf of none), and after the leaf before
  // (load_extents refuses extents out of order).
  leaves_.push_back({block, extents.front().logical, extents.size(), fingerprint(extents)});
}

std::vector<uint64_t> ExtentTree::blocks() const {
  std::vector<uint64_t> all;
  all.reserve(leaves_.size() + index_.size());
  for (const Leaf& leaf : leaves_) all.push_back(leaf.block);
  all.insert(all.end(), index_.begin(), index_.end());
  return all;
}

void ExtentTree::release_all(const std::function<void(uint64_t)>& release) {
  for (const uint64_t b : blocks()) release(b);
  leaves_.clear();
  index_.clear();
  root_ = {0, 0};
}

void ExtentTree::write_leaf(Leaf& leaf, std::span<const Extent> extents, const Blocks& blocks) {
  encode_extent_leaf(extents, leaf.block, blocks.image(leaf.block));
  leaf.first = extents.front().logical;
  leaf.count = extents.size();
  leaf.print = fingerprint(extents);
}

Result<void> ExtentTree::rebuild(std::span<const Extent> extents, const Blocks& blocks,
                                 Written& written) {
  // The index blocks stay for write_index to reuse; the leaves are all written again.
  std::vector<Leaf> old = std::move(leaves_);
  leaves_.clear();
  size_t reused = 0;
  for (size_t i = 0; i < extents.size(); i += kLeafExtents) {
    const size_t n = std::min(kLeafExtents, extents.size() - i);
    Leaf leaf{};
    if (reused < old.size()) {
      leaf.block = old[reused++].block;
    } else {
      auto block = blocks.allocate();
      if (!block) return fail(block.error());
      leaf.block = *block;
    }
    write_leaf(leaf, extents.subspan(i, n), blocks);
    leaves_.push_back(leaf);
    ++written.leaves;
  }
  for (; reused < old.size(); ++reused) blocks.release(old[reused].block);
  written.rebuilt = true;
  return {};
}

std::pair<uint64_t, uint64_t> ExtentTree::range_of(size_t i) const {
  return {i == 0 ? 0 : leaves_[i].first,
          i + 1 < leaves_.size() ? leaves_[i + 1].first : UINT64_MAX};
}

ExtentTree::Plan ExtentTree::plan(Lister list, const std::optional<Ranges>& changed) const {
  Plan plan;
  plan.list = std::move(list);
  if (!changed || leaves_.empty()) {
    plan.listed = plan.list(0, UINT64_MAX);
    plan.listed_all = true;
    plan.extents = plan.listed.size();
    // Each leaf's share, by the ranges the leaves had.
    const std::vector<Extent>& all = plan.listed;
    size_t at = 0;
    for (size_t i = 0; i < leaves_.size(); ++i) {
      const uint64_t bound = range_of(i).second;
      const size_t end = static_cast<size_t>(
          std::partition_point(all.begin() + static_cast<ptrdiff_t>(at), all.end(),
                               [bound](const Extent& e) { return e.logical < bound; }) -
          all.begin());
      plan.shares.push_back({i, at, end});
      at = end;
    }
    return plan;
  }
  for (const Leaf& leaf : leaves_) plan.extents += leaf.count;
  // The leaves whose ranges meet a changed range (both sorted): listed again.
  size_t r = 0;
  for (size_t i = 0; i < leaves_.size(); ++i) {
    const auto [from, to] = range_of(i);
    while (r < changed->size() && (*changed)[r].second <= from) ++r;
    if (r == changed->size()) break;
    if ((*changed)[r].first >= to) continue;
    const std::vector<Extent> share = plan.list(from, to);
    plan.shares.push_back({i, plan.listed.size(), plan.listed.size() + share.size()});
    plan.listed.insert(plan.listed.end(), share.begin(), share.end());
    plan.extents = plan.extents - leaves_[i].count + share.size();
  }
  return plan;
}

Result<ExtentTree::Root> ExtentTree::store(std::span<const Extent> extents, const Blocks& blocks,
                                           Written* written) {
  const Lister list = [extents](uint64_t from, uint64_t to) {
    const auto starts_before = [](uint64_t bound) {
      return [bound](const Extent& e) { return e.logical < bound; };
    };
    auto first = std::partition_point(extents.begin(), extents.end(), starts_before(from));
    auto last = std::partition_point(first, extents.end(), starts_before(to));
    return std::vector<Extent>(first, last);
  };
  return store(plan(list, std::nullopt), blocks, written);
}

Result<ExtentTree::Root> ExtentTree::store(Plan plan, const Blocks& blocks, Written* written_out) {
  // A tree of no leaf has no root (the filesystem keeps so few extents in the inode).
  if (plan.extents == 0) return fail(EINVAL, "an extent tree needs at least one extent");
  Written ignored;
  auto root = store_changes(plan, blocks, written_out != nullptr ? *written_out : ignored);
  if (!root) {
    // Part of it may be written, and blocks given back: the transaction fails (the
    // filesystem's commit then fails the filesystem, read-only: the last commit stays the
    // state), and the tree forgets its blocks rather than give any back twice.
    leaves_.clear();
    index_.clear();
    root_ = {0, 0};
  }
  return root;
}

Result<ExtentTree::Root> ExtentTree::store_changes(Plan& plan, const Blocks& blocks,
                                                   Written& written) {
  const size_t packed = (plan.extents + kLeafExtents - 1) / kLeafExtents;
  bool reshaped = false;  // the leaves or their first blocks changed: the index follows
  const auto share_of = [&plan](const Plan::Share& share) {
    return std::span<const Extent>(plan.listed).subspan(share.begin, share.end - share.begin);
  };
  if (leaves_.empty() || leaves_.size() > 2 * packed + 1) {
    if (!plan.listed_all) plan.listed = plan.list(0, UINT64_MAX);
    if (auto r = rebuild(plan.listed, blocks, written); !r) return fail(r.error());
    reshaped = true;
  } else if (std::all_of(plan.shares.begin(), plan.shares.end(), [](const Plan::Share& share) {
               return share.end > share.begin && share.end - share.begin <= kLeafExtents;
             })) {
    // Every changed leaf still fits its block (a commit after a few random writes): each
    // rewritten in place, the others untouched, nothing copied.
    for (const Plan::Share& changed : plan.shares) {
      const std::span<const Extent> share = share_of(changed);
      Leaf& leaf = leaves_[changed.leaf];
      if (share.size() == leaf.count && fingerprint(share) == leaf.print) continue;
      const uint64_t first = leaf.first;
      write_leaf(leaf, share, blocks);
      ++written.leaves;
      reshaped = reshaped || leaf.first != first;
    }
  } else {
    // Leaves emptied or outgrown: the list is made again.
    std::vector<Leaf> next;
    next.reserve(leaves_.size() + plan.shares.size());
    size_t changed = 0;
    for (size_t i = 0; i < leaves_.size(); ++i) {
      Leaf leaf = leaves_[i];
      if (changed == plan.shares.size() || plan.shares[changed].leaf != i) {
        next.push_back(leaf);
        continue;
      }
      const std::span<const Extent> share = share_of(plan.shares[changed++]);
      if (share.empty()) {
        blocks.release(leaf.block);
        continue;
      }
      if (share.size() <= kLeafExtents) {
        if (share.size() != leaf.count || fingerprint(share) != leaf.print) {
          write_leaf(leaf, share, blocks);
          ++written.leaves;
        }
        next.push_back(leaf);
        continue;
      }
      // Outgrew its block: split into leaves about three quarters full, the first in place.
      const size_t pieces = (share.size() + kSplitLeafExtents - 1) / kSplitLeafExtents;
      for (size_t p = 0, from = 0; p < pieces; ++p) {
        const size_t to = share.size() * (p + 1) / pieces;
        if (p > 0) {
          auto block = blocks.allocate();
          if (!block) return fail(block.error());
          leaf.block = *block;
        }
        write_leaf(leaf, share.subspan(from, to - from), blocks);
        ++written.leaves;
        next.push_back(leaf);
        from = to;
      }
    }
    leaves_ = std::move(next);
    reshaped = true;
  }
  if (!reshaped && root_.block != 0) return root_;  // the index says the same
  auto root = write_index(blocks, written);
  if (root) root_ = *root;
  return root;
}

Result<ExtentTree::Root> ExtentTree::write_index(const Blocks& blocks, Written& written) {
  std::vector<uint64_t> old = std::move(index_);
  index_.clear();
  size_t reused = 0;
  std::vector<IndexEntry> level;
  for (const Leaf& leaf : leaves_) level.push_back({leaf.first, leaf.block});
  uint32_t depth = 1;
  while (level.size() > 1) {
    std::vector<IndexEntry> up;
    for (size_t i = 0; i < level.size(); i += kIndexEntries) {
      uint64_t block = 0;
      if (reused < old.size()) {
        block = old[reused++];
      } else {
        auto got = blocks.allocate();
        if (!got) return fail(got.error());
        block = *got;
      }
      index_.push_back(block);
      const size_t n = std::min(kIndexEntries, level.size() - i);
      encode_extent_index(std::span(level).subspan(i, n), depth, block, blocks.image(block));
      ++written.index_blocks;
      up.push_back({level[i].first_logical, block});
    }
    level = std::move(up);
    ++depth;
  }
  for (; reused < old.size(); ++reused) blocks.release(old[reused]);
  return Root{depth, level.front().block};
}

}  // namespace stripefs::fs
