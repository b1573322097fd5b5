// A range of the Volume seen as a Member, so the metadata journal (journal/Journal, which
// writes to a device) can live on the array itself.
#pragma once
#include "member.hpp"
#include "volume.hpp"

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

}  // namespace stripefs::fs
