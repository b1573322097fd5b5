// A member backed by a block device or a regular file. Block devices (opened exclusively, as
// md does) and files on disk are opened with O_DIRECT and driven by an IoEngine (io_uring).
// A file whose filesystem refuses O_DIRECT is opened buffered instead (logged) and still
// goes through the ring.
//
// Files on tmpfs are driven inline. With InMemory::automatic, open() asks statfs whether a
// regular file lives on tmpfs; such a file is opened without O_DIRECT and never reaches the
// ring: submit() does the request with preadv2/pwritev2 on the submitting thread (FUA as
// RWF_DSYNC, a flush as fdatasync), retries short transfers, and runs `done` before it
// returns, as MemoryMember does. The reason: on tmpfs O_DIRECT bypasses nothing, io_uring
// hands such reads to a worker thread, and the ring costs two thread wake-ups per request.
// A 4 KiB Volume read of a tmpfs member took 80 us through the ring, 0.7 us inline. The
// programs get this for member files on tmpfs (open_devices in member_devices.hpp opens
// with the default).
//
// InMemory::ring keeps O_DIRECT and the ring on tmpfs too. The benchmarks and the demo ask
// for it (MemberFiles in tests/bench/bench_util.cpp), because they measure and show the
// ring path, and so do the unit tests of the io_uring path that use tmpfs files
// (StripeJournal.CheckpointsOnIoUringMembersDoNotDeadlock,
// FaultInjection.UnregisteredRegionAtAReusedAddressIsNotUsed). file_member_test.cpp keeps
// its files in /var/tmp for the same reason; its InMemoryFilesSkipTheRing checks that no
// request of a tmpfs file reaches the engine.
#pragma once

#include <memory>
#include <string>

#include "raid/io_engine.hpp"
#include "raid/member.hpp"

namespace stripefs {

class FileMember final : public Member {
 public:
  // How a file on tmpfs is driven (above): `automatic` inline on the submitting thread,
  // `ring` like any device, through the IoEngine with O_DIRECT. Other files and block
  // devices always go through the ring.
  enum class InMemory : uint8_t { automatic, ring };
  // Opens `path` (block device: exclusively, as md does). `engine` must outlive the member.
  static Result<std::unique_ptr<FileMember>> open(const std::string& path, IoEngine& engine,
                                                  InMemory in_memory = InMemory::automatic);
  ~FileMember() override;

  void submit(MemberRequest request) override;
  bool direct_io() const { return direct_; }
  bool is_block_device() const { return block_device_; }
  // A tmpfs file driven on the submitting thread: requests complete before submit() returns.
  bool inline_io() const { return inline_io_; }

 private:
  FileMember(std::string name, uint64_t size, DeviceLimits limits, int fd, IoEngine& engine,
             bool direct, bool block_device, bool inline_io);

  int fd_;
  IoEngine& engine_;
  bool direct_;
  bool block_device_;
  bool inline_io_;  // a tmpfs file driven on the submitting thread
};

// Limits of a block device from /sys/dev/block/MAJ:MIN/queue (the parent's for a
// partition). Exposed for tests.
Result<DeviceLimits> block_device_limits(unsigned major, unsigned minor);

}  // namespace stripefs
