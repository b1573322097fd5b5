// A member backed by a block device or a regular file, opened with O_DIRECT and driven by
// an IoEngine (io_uring).
#pragma once

#include <memory>
#include <string>

#include "raid/io_engine.hpp"
#include "raid/member.hpp"

namespace stripefs {

class FileMember final : public Member {
 public:
  // How a file on tmpfs is driven: `automatic` copies to and from it on the submitting
  // thread (it is memory; the ring would only add two thread wake-ups per request), `ring`
  // drives it like any device, through the IoEngine with O_DIRECT (tests and benchmarks of
  // the ring path use it). Other files and block devices always go through the ring.
  enum class InMemory : uint8_t { automatic, ring };
  // Opens `path` (block device: exclusively, as md does). `engine` must outlive the member.
  static Result<std::unique_ptr<FileMember>> open(const std::string& path, IoEngine& engine,
                                                  InMemory in_memory = InMemory::automatic);
  ~FileMember() override;

  void submit(MemberRequest request) override;
  bool direct_io() const { return direct_; }
  bool is_block_device() const { return block_device_; }

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
