#include "raid/ondisk.hpp"

#include <isa-l/crc.h>

namespace stripefs::ondisk {

uint32_t crc32c(std::span<const std::byte> bytes) {
  // isa-l neither pre- nor post-inverts, so both are done here; it takes a non-const
  // pointer but only reads.
  auto* data = reinterpret_cast<unsigned char*>(const_cast<std::byte*>(bytes.data()));
  return ~crc32_iscsi(data, static_cast<int>(bytes.size()), 0xFFFFFFFFu);
}

}  // namespace stripefs::ondisk
