#include "fs/core/meta_store.hpp"

#include <algorithm>
#include <cstring>

#include "fs/core/fs_log.hpp"

namespace stripefs::fs {

MetaStore::MetaStore(Volume& volume, Journal& journal, size_t cache_limit_blocks)
    : volume_(volume), journal_(journal), cache_limit_(cache_limit_blocks) {}

Result<std::span<std::byte, kBlockSize>> MetaStore::read(uint64_t block) {
  if (auto it = cache_.find(block); it != cache_.end()) {
    return std::span<std::byte, kBlockSize>(it->second.image.data(), kBlockSize);
  }
  AlignedBuffer image(kBlockSize);
  BlockImage committed;
  {
    std::lock_guard lock(images_mutex_);
    if (auto it = committing_.find(block); it != committing_.end()) {
      committed = it->second;
    } else if (auto it2 = images_.find(block); it2 != images_.end()) {
      committed = it2->second;
    }
  }
  if (committed) {
    std::memcpy(image.data(), committed->data(), kBlockSize);
  } else {
    if (auto r = volume_.read(block * kBlockSize, image.span()); !r) {
      return fail(r.error().code, "metadata block {}: {}", block, r.error().message);
    }
    ++stats_.block_reads;
  }
  auto [it, inserted] = cache_.emplace(block, Cached{std::move(image)});
  return std::span<std::byte, kBlockSize>(it->second.image.data(), kBlockSize);
}

std::vector<uint64_t> MetaStore::dirty_in(uint64_t first, uint64_t end) const {
  std::vector<uint64_t> blocks;
  for (auto it = dirty_.lower_bound(first); it != dirty_.end() && it->first < end; ++it) {
    blocks.push_back(it->first);
  }
  return blocks;
}

bool MetaStore::home_behind(uint64_t block) const {
  if (dirty_.contains(block)) return true;
  std::lock_guard lock(images_mutex_);
  return committing_.contains(block) || images_.contains(block);
}

void MetaStore::index_blocks(uint64_t first, uint64_t count) {
  index_first_ = first;
  index_count_ = count;
  index_.clear();
  index_.resize((count + kIndexPage - 1) / kIndexPage);
}

std::byte** MetaStore::index_slot(uint64_t block, bool make) {
  const uint64_t i = block - index_first_;  // wraps below the range
  if (i >= index_count_) return nullptr;
  auto& page = index_[i / kIndexPage];
  if (!page) {
    if (!make) return nullptr;
    page = std::make_unique<IndexPage>();
    page->fill(nullptr);
  }
  return &(*page)[i % kIndexPage];
}

Result<std::span<std::byte, kBlockSize>> MetaStore::read_checked(uint64_t block,
                                                                 const Volume::BlockCheck& good) {
  if (std::byte** slot = index_slot(block, false); slot != nullptr && *slot != nullptr) {
    return std::span<std::byte, kBlockSize>(*slot, kBlockSize);  // the hottest path
  }
  if (auto it = cache_.find(block); it != cache_.end() && it->second.checked) {
    return std::span<std::byte, kBlockSize>(it->second.image.data(), kBlockSize);  // hot path
  }
  auto image = read(block);
  if (!image) return image;
  Cached& cached = cache_.at(block);
  if (!cached.checked && !good(*image)) {
    if (auto healed = heal(block, good); !healed) return healed;
  }
  cached.checked = true;
  if (std::byte** slot = index_slot(block, true)) *slot = cached.image.data();
  return image;
}

Result<std::span<std::byte, kBlockSize>> MetaStore::heal(uint64_t block,
                                                         const Volume::BlockCheck& good) {
  auto image = read(block);
  if (!image) return image;
  if (home_behind(block)) {
    // Changed since it was read (a transaction's, or a commit's not yet home): what was
    // damaged in it can no longer be told from redundancy.
    return fail(EUCLEAN, "metadata block {}: fails its check, and has changed since it was read",
                block);
  }
  auto recovered = volume_.recover_block(block * kBlockSize, *image, good);
  if (!recovered) {
    return fail(EUCLEAN, "metadata block {}: damaged: {}", block, recovered.error().message);
  }
  ++stats_.healed_blocks;
  fs_log().warn("metadata block {}: damaged as read; recovered from redundancy{}", block,
                recovered->rewritten.empty() ? "" : " and rewritten");
  return image;
}

std::span<std::byte, kBlockSize> MetaStore::modify(uint64_t block) {
  auto image = read(block);
  if (!image) {
    if (!failed_) failed_ = image.error();
    return std::span<std::byte, kBlockSize>(scratch_.data(), kBlockSize);
  }
  dirty_[block] = true;
  return *image;
}

std::span<std::byte, kBlockSize> MetaStore::fresh(uint64_t block) {
  auto it = cache_.find(block);
  if (it == cache_.end()) {
    it = cache_.emplace(block, Cached{AlignedBuffer(kBlockSize)}).first;
  }
  it->second.image.zero();
  it->second.checked = false;
  unindex(block);
  dirty_[block] = true;
  return std::span<std::byte, kBlockSize>(it->second.image.data(), kBlockSize);
}

void MetaStore::forget(uint64_t block) {
  if (dirty_.contains(block)) return;  // goes out with its transaction; harmless
  unindex(block);
  cache_.erase(block);
}

// Drops clean blocks once the cache is over its limit. Dirty blocks stay until committed.
void MetaStore::trim() {
  if (cache_.size() < cache_limit_) return;
  size_t to_drop = cache_.size() - cache_limit_ / 2;
  for (auto it = cache_.begin(); it != cache_.end() && to_drop > 0;) {
    if (dirty_.contains(it->first) || pinned_.contains(it->first)) {
      ++it;
    } else {
      unindex(it->first);
      cache_.erase(it++);  // the other iterators stay valid
      --to_drop;
    }
  }
}

MetaStore::Snapshot MetaStore::take_snapshot() {
  Snapshot snapshot;
  snapshot.transaction = running_++;
  snapshot.blocks.reserve(dirty_.size());
  for (const auto& [block, unused] : dirty_) {
    auto image = std::make_shared<AlignedBuffer>(kBlockSize);
    std::memcpy(image->data(), cache_.at(block).image.data(), kBlockSize);
    // Sealed as copied: the journal refuses an image that changes before it is written.
    snapshot.sealed.push_back(data_block_checksum(
        std::span<const std::byte, kJournalBlockSize>(image->data(), kJournalBlockSize)));
    snapshot.blocks.emplace_back(block, std::move(image));
  }
  dirty_.clear();
  std::lock_guard lock(images_mutex_);
  for (const auto& [block, image] : snapshot.blocks) committing_[block] = image;
  return snapshot;
}

Result<uint64_t> MetaStore::write_snapshot(const Snapshot& snapshot) {
  // Ordered mode: data written before this commit must be durable before the metadata
  // that points at it can be replayed.
  if (auto r = volume_.flush(); !r) return fail(r.error());
  if (snapshot.blocks.empty()) return 0;
  auto journal_blocks = [&] {
    std::vector<JournalBlock> blocks;
    blocks.reserve(snapshot.blocks.size());
    for (size_t i = 0; i < snapshot.blocks.size(); ++i) {
      blocks.push_back(
          {snapshot.blocks[i].first, snapshot.blocks[i].second->span(), snapshot.sealed[i]});
    }
    return blocks;
  };
  auto sequence = journal_.commit(journal_blocks());
  if (!sequence && sequence.error().code == ENOSPC) {
    // The log is full of transactions already home-written or waiting: checkpoint them.
    if (auto r = checkpoint(); !r) return fail(r.error());
    sequence = journal_.commit(journal_blocks());
  }
  return sequence;
}

void MetaStore::committed(const Snapshot& snapshot, uint64_t sequence) {
  if (snapshot.blocks.empty()) return;
  std::lock_guard lock(images_mutex_);
  for (const auto& [block, image] : snapshot.blocks) {
    images_[block] = image;
    if (auto it = committing_.find(block); it != committing_.end() && it->second == image) {
      committing_.erase(it);
    }
  }
  last_sequence_ = sequence;
  last_transaction_ = snapshot.transaction;
  ++stats_.commits;
  stats_.committed_blocks += snapshot.blocks.size();
}

bool MetaStore::checkpoint_due() const {
  std::lock_guard lock(images_mutex_);
  return !images_.empty() &&
         (journal_.used_blocks() * 2 > journal_.capacity_blocks() || images_.size() > 8192);
}

Result<uint64_t> MetaStore::checkpoint() {
  std::vector<std::pair<uint64_t, BlockImage>> images;
  uint64_t sequence = 0, transaction = 0;
  {
    std::lock_guard lock(images_mutex_);
    images.assign(images_.begin(), images_.end());
    sequence = last_sequence_;
    transaction = last_transaction_;
  }
  if (images.empty()) return transaction;
  std::sort(images.begin(), images.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  // Contiguous blocks go out as one request of several pieces.
  constexpr size_t kBatch = 256;
  for (size_t i = 0; i < images.size(); i += kBatch) {
    std::vector<VolumePiece> pieces;
    for (size_t j = i; j < std::min(images.size(), i + kBatch); ++j) {
      pieces.push_back({images[j].first * kBlockSize, images[j].second->span()});
    }
    auto written = wait_for<Result<void>>(
        [&](Volume::Callback done) { volume_.write(std::move(pieces), done); });
    if (!written) return fail(written.error());
  }
  if (auto r = volume_.flush(); !r) return fail(r.error());
  if (auto r = journal_.checkpoint(sequence); !r) return fail(r.error());
  std::lock_guard lock(images_mutex_);
  for (const auto& [block, image] : images) {
    if (auto it = images_.find(block); it != images_.end() && it->second == image) {
      images_.erase(it);
    }
  }
  ++stats_.checkpoints;
  stats_.checkpointed_blocks += images.size();
  return transaction;
}

MetaStats MetaStore::stats() const {
  MetaStats s;
  {
    std::lock_guard lock(images_mutex_);
    s = stats_;
  }
  const JournalStats j = journal_.stats();
  s.journal_blocks_written = j.blocks_written;
  s.journal_padding_blocks = j.padding_blocks;
  return s;
}

}  // namespace stripefs::fs
