#include "raid/memory_member.hpp"

#include <cstring>

namespace stripefs {

MemoryMember::MemoryMember(std::string name, uint64_t size, DeviceLimits limits)
    : Member(std::move(name), size, limits), data_(new std::byte[size]()) {}

void MemoryMember::submit(MemberRequest request) {
  int64_t result = 0;
  if (request.op != MemberOp::flush) {
    const uint64_t length = request.length();
    if (request.offset > size() || length > size() - request.offset) {
      result = -EINVAL;
    } else {
      std::lock_guard lock(mutex_);
      uint64_t at = request.offset;
      for (const iovec& v : request.iov) {
        if (request.op == MemberOp::read) {
          std::memcpy(v.iov_base, data_.get() + at, v.iov_len);
        } else {
          std::memcpy(data_.get() + at, v.iov_base, v.iov_len);
        }
        at += v.iov_len;
      }
      result = static_cast<int64_t>(length);
    }
  }
  request.done(result);
}

}  // namespace stripefs
