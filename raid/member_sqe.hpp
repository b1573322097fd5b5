// The io_uring entry for a member request, shared by the IoEngine and a thread's own ring
// (LocalRing): a flush as fdatasync; a read or write as readv/writev (FUA as RWF_DSYNC), or,
// given a registered buffer's slot (`fixed_slot` >= 0) that holds every segment, as a
// fixed-buffer read or write (several segments: READV_FIXED/WRITEV_FIXED, which the caller
// has found the kernel to have; ring_buffers.hpp). `request` must outlive the entry's
// submission (its iovecs).
#pragma once

#include <liburing.h>

#include "raid/member.hpp"
#include "raid/ring_buffers.hpp"

namespace stripefs {

inline void prep_member_sqe(io_uring_sqe* sqe, int fd, const MemberRequest& request,
                            int fixed_slot = -1) {
  const int rw_flags = request.fua ? RWF_DSYNC : 0;
  if (request.op == MemberOp::flush) {
    io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
  } else if (fixed_slot >= 0 && request.iov.size() > 1) {
    const unsigned op = request.op == MemberOp::read ? kOpReadvFixed : kOpWritevFixed;
    io_uring_prep_rw(static_cast<int>(op), sqe, fd, request.iov.data(),
                     static_cast<unsigned>(request.iov.size()), request.offset);
    sqe->buf_index = static_cast<__u16>(fixed_slot);
    sqe->rw_flags = rw_flags;
  } else if (fixed_slot >= 0) {
    auto* base = request.iov[0].iov_base;
    const auto len = static_cast<unsigned>(request.iov[0].iov_len);
    if (request.op == MemberOp::read) {
      io_uring_prep_read_fixed(sqe, fd, base, len, request.offset, fixed_slot);
    } else {
      io_uring_prep_write_fixed(sqe, fd, base, len, request.offset, fixed_slot);
    }
    sqe->rw_flags = rw_flags;
  } else if (request.op == MemberOp::read) {
    io_uring_prep_readv2(sqe, fd, request.iov.data(), static_cast<unsigned>(request.iov.size()),
                         request.offset, 0);
  } else {
    io_uring_prep_writev2(sqe, fd, request.iov.data(), static_cast<unsigned>(request.iov.size()),
                          request.offset, rw_flags);
  }
}

}  // namespace stripefs
