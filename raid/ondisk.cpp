#include "raid/ondisk.hpp"

#include <isa-l/crc.h>

namespace stripefs::ondisk {

uint32_t crc32c(std::span<const std::byte> bytes) {
  // isa-l neither pre- nor post-inverts, so both are done here; it takes a non-const
  // pointer but only reads.
  auto* data = reinterpret_cast<unsigned char*>(const_cast<std::byte*>(bytes.data()));
  return ~crc32_iscsi(data, static_cast<int>(bytes.size()), 0xFFFFFFFFu);
}

void seal(std::span<std::byte> out, size_t checksum_at) {
  put_le(out, checksum_at, crc32c(out.first(checksum_at)));
}

Result<void> check_checksum(std::span<const std::byte> in, size_t checksum_at,
                            std::string_view where, std::string_view what) {
  const auto stored = get_le<uint32_t>(in, checksum_at);
  const uint32_t computed = crc32c(in.first(checksum_at));
  if (stored != computed) {
    return fail(EUCLEAN, "{}: {}{}checksum mismatch (stored 0x{:08x}, computed 0x{:08x})", where,
                what, what.empty() ? "" : " ", stored, computed);
  }
  return {};
}

Result<void> check_sealed(std::span<const std::byte> in, const Sealed& layout,
                          std::string_view where, std::string_view what) {
  const auto magic = get_le<uint32_t>(in, layout.magic_at);
  if (magic != layout.magic) {
    return fail(ENODATA, "{}: {} magic 0x{:08x} is not 0x{:08x} (no stripefs {})", where, what,
                magic, layout.magic, what);
  }
  return check_checksum(in, layout.checksum_at, where, what);
}

}  // namespace stripefs::ondisk
