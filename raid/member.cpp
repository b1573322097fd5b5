#include "raid/member.hpp"

#include <cstring>
#include <memory>

#include "raid/wait.hpp"

namespace stripefs {

uint64_t MemberRequest::length() const {
  uint64_t total = 0;
  for (const iovec& v : iov) total += v.iov_len;
  return total;
}

void Member::count(MemberOp op, uint64_t bytes, bool ok) {
  constexpr auto relaxed = std::memory_order_relaxed;
  if (!ok) errors_.fetch_add(1, relaxed);
  if (op == MemberOp::read) {
    reads_.fetch_add(1, relaxed);
    read_bytes_.fetch_add(bytes, relaxed);
  } else if (op == MemberOp::write) {
    writes_.fetch_add(1, relaxed);
    written_bytes_.fetch_add(bytes, relaxed);
  }
}

MemberCounters Member::counters() const {
  constexpr auto relaxed = std::memory_order_relaxed;
  return {reads_.load(relaxed),          writes_.load(relaxed), read_bytes_.load(relaxed),
          written_bytes_.load(relaxed),  errors_.load(relaxed), corrected_.load(relaxed),
          checksum_errors_.load(relaxed)};
}

namespace {

// Counts a finished request on its member and says what came of it.
Result<void> outcome(Member& member, MemberOp op, uint64_t offset, uint64_t expected,
                     int64_t result) {
  member.count(op, result > 0 ? static_cast<uint64_t>(result) : 0,
               result >= 0 && (op == MemberOp::flush || static_cast<uint64_t>(result) == expected));
  const char* what = op == MemberOp::read ? "read" : op == MemberOp::write ? "write" : "flush";
  if (result < 0) {
    return fail(static_cast<int>(-result), "{}: {} at byte {} failed: {}", member.name(), what,
                offset, std::strerror(static_cast<int>(-result)));
  }
  if (op != MemberOp::flush && static_cast<uint64_t>(result) != expected) {
    return fail(EIO, "{}: short {} at byte {}: {} of {} bytes", member.name(), what, offset, result,
                expected);
  }
  return {};
}

Result<void> run_sync(Member& member, MemberRequest request) {
  const uint64_t expected = request.length();
  const uint64_t offset = request.offset;
  const MemberOp op = request.op;
  const int64_t result = wait_for<int64_t>([&](std::function<void(int64_t)> done) {
    request.done = std::move(done);
    member.start(std::move(request));
  });
  return outcome(member, op, offset, expected, result);
}

}  // namespace

std::future<Result<void>> member_start(Member& member, MemberOp op, uint64_t offset,
                                       std::span<std::byte> buffer) {
  auto promise = std::make_shared<std::promise<Result<void>>>();
  std::future<Result<void>> future = promise->get_future();
  MemberRequest request;
  request.op = op;
  request.offset = offset;
  request.iov.push_back({buffer.data(), buffer.size()});
  request.done = [&member, op, offset, expected = buffer.size(), promise](int64_t result) {
    promise->set_value(outcome(member, op, offset, expected, result));
  };
  member.start(std::move(request));
  return future;
}

Result<void> member_read(Member& member, uint64_t offset, std::span<std::byte> buffer) {
  MemberRequest request;
  request.op = MemberOp::read;
  request.offset = offset;
  request.iov.push_back({buffer.data(), buffer.size()});
  return run_sync(member, std::move(request));
}

Result<void> member_write(Member& member, uint64_t offset, std::span<const std::byte> buffer,
                          bool fua) {
  MemberRequest request;
  request.op = MemberOp::write;
  request.offset = offset;
  request.fua = fua;
  request.iov.push_back({const_cast<std::byte*>(buffer.data()), buffer.size()});
  return run_sync(member, std::move(request));
}

Result<void> member_flush(Member& member) {
  MemberRequest request;
  request.op = MemberOp::flush;
  return run_sync(member, std::move(request));
}

}  // namespace stripefs
