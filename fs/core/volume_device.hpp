// A range of the Volume seen as a Member, so the metadata journal (journal/Journal, which
// writes to a device) can live on the array itself.
#pragma once
#include "raid/member.hpp"
#include "raid/volume.hpp"

namespace stripefs::fs {

class VolumeDevice final : public Member {
 public:
  // Bytes [offset, offset + size) of `volume`, which must outlive this device.
  VolumeDevice(Volume& volume, uint64_t offset, uint64_t size);
  void submit(MemberRequest request) override;

 private:
  Volume& volume_;
  uint64_t offset_;
};

// The alignment (bytes) for the metadata journal on `volume`: its stripe on a parity
// level, so commits are written as full stripes and never need the write-hole journal;
// none (0) elsewhere, or when the journal is under 16 stripes (padding would crowd it).
uint64_t journal_alignment(const Volume& volume, uint64_t journal_blocks);

}  // namespace stripefs::fs
