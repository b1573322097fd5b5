// Data checksums: a crc32c of every block of file data, in a table indexed by volume block
// (format.hpp), set in the transaction that makes the data's extents durable and checked on
// every read that comes from the members. A block that fails is looked for in the array's
// redundancy; the reader gets good bytes or EIO, never wrong ones.
//
// Why a flat table by volume block: a block's checksum has one fixed home, so extents can be
// split, merged and moved between inline and tree form without carrying checksums along;
// copy on write leaves the old block's checksum valid until the block is freed; and reads
// of neighbouring blocks find theirs in one table block (1,020 blocks, 4 MiB of data).
#include <cstring>

#include "fs/core/filesystem.hpp"
#include "fs/core/fs_log.hpp"
#include "raid/ondisk.hpp"

namespace stripefs::fs {

std::pair<uint64_t, size_t> Filesystem::checksum_slot(uint64_t b) const {
  const uint64_t index = b - sb_.data_start;
  return {sb_.checksum_start + index / kChecksumsPerBlock,
          kHeaderSize + (index % kChecksumsPerBlock) * 4};
}

namespace {

Volume::BlockCheck table_check(uint64_t block) {
  return [block](std::span<const std::byte> image) {
    return verify_block(std::span<const std::byte, kBlockSize>(image.data(), kBlockSize),
                        BlockKind::checksums, block)
        .has_value();
  };
}

}  // namespace

std::vector<std::pair<uint64_t, uint32_t>> Filesystem::data_checksums(
    const std::vector<VolumePiece>& pieces) {
  std::vector<std::pair<uint64_t, uint32_t>> checksums;
  for (const VolumePiece& piece : pieces) {
    for (uint64_t at = 0; at + kBlockSize <= piece.data.size(); at += kBlockSize) {
      checksums.emplace_back((piece.offset + at) / kBlockSize,
                             data_checksum(piece.data.subspan(at, kBlockSize)));
    }
  }
  return checksums;
}

Result<void> Filesystem::store_checksums(
    const std::vector<std::pair<uint64_t, uint32_t>>& checksums) {
  // Blocks of one table block are changed together and sealed once.
  for (size_t i = 0; i < checksums.size();) {
    const uint64_t table = checksum_slot(checksums[i].first).first;
    // Checked before it is changed: sealing a damaged block would make its damage look
    // right.
    if (auto r = meta_->read_checked(table, table_check(table)); !r) return fail(r.error());
    auto image = meta_->modify(table);
    for (; i < checksums.size() && checksum_slot(checksums[i].first).first == table; ++i) {
      ondisk::put_le<uint32_t>(image, checksum_slot(checksums[i].first).second,
                               checksums[i].second);
    }
    seal_block(image, BlockKind::checksums, table);
  }
  return {};
}

Result<void> Filesystem::expect_checksums(ReadCheck& check) {
  check.expected.clear();
  uint64_t table = 0;
  std::span<const std::byte> image;
  for (const ReadCheck::Run& run : check.runs) {
    for (uint64_t i = 0; i < run.length / kBlockSize; ++i) {
      const auto [block, offset] = checksum_slot(run.volume_block + i);
      if (block != table) {
        auto got = meta_->read_checked(block, table_check(block));
        if (!got)
          return fail(EIO, "inode {}: checksums of file byte {}: {}", check.ino,
                      run.file_offset + i * kBlockSize, got.error().message);
        image = *got;
        table = block;
      }
      check.expected.push_back(ondisk::get_le<uint32_t>(image, offset));
    }
  }
  return {};
}

std::vector<size_t> Filesystem::failed_blocks(const ReadCheck& check,
                                              std::span<const std::byte> read) {
  std::vector<size_t> failed;
  size_t index = 0;
  for (const ReadCheck::Run& run : check.runs) {
    for (uint64_t at = 0; at < run.length; at += kBlockSize, ++index) {
      if (data_checksum(read.subspan(run.at + at, kBlockSize)) != check.expected[index]) {
        failed.push_back(index);
      }
    }
  }
  return failed;
}

Result<void> Filesystem::recover_blocks(const ReadCheck& check, const std::vector<size_t>& failed,
                                        std::span<std::byte> read) {
  Result<void> result;
  size_t next = 0, index = 0;
  for (const ReadCheck::Run& run : check.runs) {
    const uint64_t blocks = run.length / kBlockSize;
    for (; next < failed.size() && failed[next] < index + blocks; ++next) {
      const uint64_t i = failed[next] - index;
      const uint64_t volume_block = run.volume_block + i;
      const uint64_t file_offset = run.file_offset + i * kBlockSize;
      const uint32_t crc = check.expected[failed[next]];
      auto recovered = volume_.recover_block(
          volume_block * kBlockSize, read.subspan(run.at + i * kBlockSize, kBlockSize),
          [crc](std::span<const std::byte> bytes) { return data_checksum(bytes) == crc; });
      if (!recovered) {
        checksum_unrecoverable_.fetch_add(1, std::memory_order_relaxed);
        fs_log().error("inode {}: file byte {} (volume block {}) fails its checksum: {}", check.ino,
                       file_offset, volume_block, recovered.error().message);
        if (result) {
          result = fail(EIO, "inode {}: file byte {}: no copy passes its checksum", check.ino,
                        file_offset);
        }
        continue;
      }
      checksum_recovered_.fetch_add(1, std::memory_order_relaxed);
      fs_log().warn(
          "inode {}: file byte {} (volume block {}) failed its checksum; the right "
          "bytes came from redundancy{}",
          check.ino, file_offset, volume_block,
          recovered->rewritten.empty() ? " (the members hold them)" : " and were rewritten");
    }
    index += blocks;
  }
  return result;
}

}  // namespace stripefs::fs
