#include "fs/core/volume_device.hpp"

#include <memory>

#include "journal/log_format.hpp"

namespace stripefs::fs {

namespace {
DeviceLimits limits_of(const Volume& volume) {
  DeviceLimits limits;
  limits.logical_block = volume.sector_size();
  limits.physical_block = 4096;
  limits.minimum_io = 4096;
  limits.optimal_io = static_cast<uint32_t>(volume.geometry().stripe_data_size());
  limits.max_io = 1u << 24;
  limits.volatile_cache = true;
  return limits;
}
}  // namespace

VolumeDevice::VolumeDevice(Volume& volume, uint64_t offset, uint64_t size)
    : Member("volume", size, limits_of(volume)), volume_(volume), offset_(offset) {}

void VolumeDevice::submit(MemberRequest request) {
  auto done = std::make_shared<std::function<void(int64_t)>>(std::move(request.done));
  if (request.op == MemberOp::flush) {
    volume_.flush([done](Result<void> r) { (*done)(r ? 0 : -r.error().code); });
    return;
  }
  std::vector<VolumePiece> pieces;
  uint64_t at = offset_ + request.offset;
  int64_t length = 0;
  for (const iovec& v : request.iov) {
    pieces.push_back({at, {static_cast<std::byte*>(v.iov_base), v.iov_len}});
    at += v.iov_len;
    length += static_cast<int64_t>(v.iov_len);
  }
  if (request.op == MemberOp::read) {
    volume_.read(std::move(pieces),
                 [done, length](Result<void> r) { (*done)(r ? length : -r.error().code); });
    return;
  }
  const bool fua = request.fua;
  volume_.write(std::move(pieces), [this, done, length, fua](Result<void> r) {
    if (!r || !fua) {
      (*done)(r ? length : -r.error().code);
      return;
    }
    volume_.flush([done, length](Result<void> f) { (*done)(f ? length : -f.error().code); });
  });
}

uint64_t journal_alignment(const Volume& volume, uint64_t journal_blocks) {
  const uint64_t stripe = volume.geometry().stripe_data_size();
  if (!volume.geometry().has_parity() || stripe % kJournalBlockSize != 0) return 0;
  if (journal_blocks < 16 * (stripe / kJournalBlockSize)) return 0;
  return stripe;
}

}  // namespace stripefs::fs
