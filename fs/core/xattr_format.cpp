// An inode's extended attributes on disk: the one-block form and the run form
// (xattr_format.hpp).
#include "fs/core/xattr_format.hpp"

#include <algorithm>
#include <cstring>

#include "raid/ondisk.hpp"

namespace stripefs::fs {

using ondisk::get_le;
using ondisk::put_le;

namespace {

constexpr size_t kRunEntryHeader = 8;  // name length, 3 zero bytes, value length
constexpr size_t kRunHeader = 8;       // count, length of the entries

size_t run_stream_bytes(std::span<const Xattr> attrs) {
  size_t total = kRunHeader;
  for (const Xattr& x : attrs) total += kRunEntryHeader + x.name.size() + x.value.size();
  return total;
}

}  // namespace

size_t xattr_bytes(std::span<const Xattr> attrs) {
  size_t total = 0;
  for (const Xattr& x : attrs) total += 4 + x.name.size() + x.value.size();
  return total;
}

uint32_t xattr_blocks_for(std::span<const Xattr> attrs) {
  const bool short_values = std::all_of(
      attrs.begin(), attrs.end(), [](const Xattr& x) { return x.value.size() <= UINT16_MAX; });
  if (short_values && xattr_bytes(attrs) <= kXattrCapacity) return 1;
  const size_t blocks =
      std::max<size_t>(2, (run_stream_bytes(attrs) + kXattrRunPayload - 1) / kXattrRunPayload);
  return blocks <= kMaxXattrBlocks ? static_cast<uint32_t>(blocks) : 0;
}

void encode_xattrs(std::span<const Xattr> attrs, uint64_t self,
                   std::span<std::byte, kBlockSize> out) {
  std::memset(out.data(), 0, kBlockSize);
  put_le<uint32_t>(out, kHeaderSize, static_cast<uint32_t>(attrs.size()));
  size_t at = kHeaderSize + 4;
  for (const Xattr& x : attrs) {
    put_le<uint8_t>(out, at, static_cast<uint8_t>(x.name.size()));
    put_le<uint16_t>(out, at + 1, static_cast<uint16_t>(x.value.size()));
    std::memcpy(out.data() + at + 4, x.name.data(), x.name.size());
    std::memcpy(out.data() + at + 4 + x.name.size(), x.value.data(), x.value.size());
    at += 4 + x.name.size() + x.value.size();
  }
  seal_block(out, BlockKind::xattr, self);
}

Result<std::vector<Xattr>> decode_xattrs(std::span<const std::byte, kBlockSize> in, uint64_t self) {
  if (auto ok = verify_block(in, BlockKind::xattr, self); !ok) return fail(ok.error());
  const uint32_t count = get_le<uint32_t>(in, kHeaderSize);
  std::vector<Xattr> attrs;
  size_t at = kHeaderSize + 4;
  for (uint32_t i = 0; i < count; ++i) {
    if (at + 4 > kBlockSize) {
      return fail(EUCLEAN, "xattr block at volume block {}: entry {}: runs past the block", self,
                  i);
    }
    const size_t name = get_le<uint8_t>(in, at);
    const size_t value = get_le<uint16_t>(in, at + 1);
    if (name == 0 || at + 4 + name + value > kBlockSize) {
      return fail(EUCLEAN, "xattr block at volume block {}: entry {}: field length", self, i);
    }
    const char* p = reinterpret_cast<const char*>(in.data() + at + 4);
    attrs.push_back({std::string(p, name), std::string(p + name, value)});
    at += 4 + name + value;
  }
  return attrs;
}

void encode_xattr_run(std::span<const Xattr> attrs, uint64_t first, uint32_t blocks,
                      std::span<std::byte> out) {
  // The stream first, then cut into the blocks' payloads.
  std::vector<std::byte> stream(static_cast<size_t>(blocks) * kXattrRunPayload);
  const size_t length = run_stream_bytes(attrs) - kRunHeader;
  put_le<uint32_t>(stream, 0, static_cast<uint32_t>(attrs.size()));
  put_le<uint32_t>(stream, 4, static_cast<uint32_t>(length));
  size_t at = kRunHeader;
  for (const Xattr& x : attrs) {
    put_le<uint8_t>(stream, at, static_cast<uint8_t>(x.name.size()));
    put_le<uint32_t>(stream, at + 4, static_cast<uint32_t>(x.value.size()));
    std::memcpy(stream.data() + at + kRunEntryHeader, x.name.data(), x.name.size());
    std::memcpy(stream.data() + at + kRunEntryHeader + x.name.size(), x.value.data(),
                x.value.size());
    at += kRunEntryHeader + x.name.size() + x.value.size();
  }
  for (uint32_t b = 0; b < blocks; ++b) {
    const auto block = std::span<std::byte, kBlockSize>(out.data() + b * kBlockSize, kBlockSize);
    std::memset(block.data(), 0, kHeaderSize);
    std::memcpy(block.data() + kHeaderSize, stream.data() + b * kXattrRunPayload, kXattrRunPayload);
    seal_block(block, BlockKind::xattr_run, first + b);
  }
}

Result<void> verify_xattr_run_block(std::span<const std::byte, kBlockSize> in, uint64_t self) {
  return verify_block(in, BlockKind::xattr_run, self);
}

Result<std::vector<Xattr>> decode_xattr_run(std::span<const std::byte> in, uint64_t first) {
  const size_t blocks = in.size() / kBlockSize;
  if (blocks < 2 || blocks > kMaxXattrBlocks || in.size() % kBlockSize != 0) {
    return fail(EUCLEAN, "xattr run at volume block {}: {} blocks", first, blocks);
  }
  std::vector<std::byte> stream(blocks * kXattrRunPayload);
  for (size_t b = 0; b < blocks; ++b) {
    const auto block =
        std::span<const std::byte, kBlockSize>(in.data() + b * kBlockSize, kBlockSize);
    if (auto ok = verify_xattr_run_block(block, first + b); !ok) return fail(ok.error());
    std::memcpy(stream.data() + b * kXattrRunPayload, block.data() + kHeaderSize, kXattrRunPayload);
  }
  const uint32_t count = get_le<uint32_t>(stream, 0);
  const size_t end = kRunHeader + get_le<uint32_t>(stream, 4);
  if (end > stream.size()) {
    return fail(EUCLEAN, "xattr run at volume block {}: field length: {} past its {} blocks", first,
                end - kRunHeader, blocks);
  }
  std::vector<Xattr> attrs;
  size_t at = kRunHeader;
  for (uint32_t i = 0; i < count; ++i) {
    if (at + kRunEntryHeader > end) {
      return fail(EUCLEAN, "xattr run at volume block {}: entry {}: runs past the end", first, i);
    }
    const size_t name = get_le<uint8_t>(stream, at);
    const size_t value = get_le<uint32_t>(stream, at + 4);
    if (name == 0 || value > kXattrValueMax || at + kRunEntryHeader + name + value > end) {
      return fail(EUCLEAN, "xattr run at volume block {}: entry {}: field length", first, i);
    }
    const char* p = reinterpret_cast<const char*>(stream.data() + at + kRunEntryHeader);
    attrs.push_back({std::string(p, name), std::string(p + name, value)});
    at += kRunEntryHeader + name + value;
  }
  return attrs;
}

}  // namespace stripefs::fs
