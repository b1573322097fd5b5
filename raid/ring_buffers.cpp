#include "raid/ring_buffers.hpp"

#include <atomic>
#include <cstring>

#include "raid/log.hpp"

namespace stripefs {

void RingBuffers::attach(io_uring* ring) {
  ring_ = ring;
  if (io_uring_probe* probe = io_uring_get_probe_ring(ring)) {
    vectored_ = io_uring_opcode_supported(probe, kOpReadvFixed) &&
                io_uring_opcode_supported(probe, kOpWritevFixed);
    io_uring_free_probe(probe);
  }
}

void RingBuffers::sync() {
  if (ring_ == nullptr || failed_) return;
  const DataArena& arena = DataArena::shared();
  const unsigned chunks = arena.chunks();
  while (registered_ < chunks) {
    iovec iov{arena.chunk_base(registered_), DataArena::kChunkBytes};
    __u64 tag = 0;
    const int rc = io_uring_register_buffers_update_tag(ring_, DataArena::kFirstSlot + registered_,
                                                        &iov, &tag, 1);
    if (rc < 0) {
      static std::atomic<bool> told{false};
      if (!told.exchange(true)) {
        raid_log().warn(
            "file data buffers not registered with io_uring ({}); they go out as "
            "ordinary requests",
            std::strerror(-rc));
      }
      failed_ = true;
      return;
    }
    ++registered_;
  }
}

int RingBuffers::slot_for(const MemberRequest& request) const {
  if (request.op == MemberOp::flush || request.iov.empty() || registered_ == 0) return -1;
  if (request.iov.size() > 1 && !vectored_) return -1;
  const DataArena& arena = DataArena::shared();
  const int chunk = arena.chunk_of(request.iov[0].iov_base, request.iov[0].iov_len, registered_);
  if (chunk < 0) return -1;
  for (size_t i = 1; i < request.iov.size(); ++i) {
    if (arena.chunk_of(request.iov[i].iov_base, request.iov[i].iov_len, registered_) != chunk) {
      return -1;
    }
  }
  return static_cast<int>(DataArena::kFirstSlot) + chunk;
}

}  // namespace stripefs
