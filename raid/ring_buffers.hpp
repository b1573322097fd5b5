// What one io_uring ring has registered of the process's DataArena, and which fixed slot a
// member request can use. The IoEngine and each thread's LocalRing keep one; both call it on
// the thread that submits to the ring (a ring made with SINGLE_ISSUER takes registrations
// from that thread only).
//
// A request is fixed when all its segments lie in one registered chunk: one segment as
// READ_FIXED/WRITE_FIXED; several (a member's run of chunks merged from one user buffer) as
// READV_FIXED/WRITEV_FIXED where the kernel has them (Linux 6.15; probed per ring).
#pragma once

#include <liburing.h>

#include "raid/data_arena.hpp"
#include "raid/member.hpp"

namespace stripefs {

// The vectored fixed opcodes (Linux 6.15), which liburing 2.3's headers do not name.
inline constexpr unsigned kOpReadvFixed = 60;
inline constexpr unsigned kOpWritevFixed = 61;

class RingBuffers {
 public:
  // How many slots a ring's sparse buffer table needs for the engine's own buffers and the
  // arena's chunks.
  static constexpr unsigned kSlots = DataArena::kFirstSlot + DataArena::kMaxChunks;

  // For a ring whose table of kSlots is registered (io_uring_register_buffers_sparse):
  // probes for the vectored fixed opcodes.
  void attach(io_uring* ring);
  // Registers the chunks the arena added since the last call. A registration the kernel
  // refuses (short of locked memory, for an unprivileged daemon) is logged once, and the ring
  // goes on without fixed arena buffers.
  void sync();
  // The slot for `request` (kFirstSlot + chunk), or -1.
  int slot_for(const MemberRequest& request) const;
  // Whether a request of several segments can be fixed on this ring.
  bool vectored() const { return vectored_; }

 private:
  io_uring* ring_ = nullptr;
  unsigned registered_ = 0;  // chunks 0..registered_-1 are registered in this ring
  bool failed_ = false;
  bool vectored_ = false;
};

}  // namespace stripefs
