#include "fs/daemon/killpriv_v2.hpp"

#include <linux/fuse.h>

#include <array>
#include <atomic>
#include <cstring>
#include <string_view>

namespace stripefs::fs::killpriv {

namespace {

std::atomic<bool> wanted{true};
std::atomic<bool> offered{false};  // by the last INIT
std::atomic<uint64_t> init_unique{0};
std::atomic<bool> on{false};
std::atomic<uint64_t> queries{0};

struct Current {
  bool kills = false;
};
thread_local Current current;
thread_local std::array<char, 256> init_reply;

template <typename T>
T arg_of(const char* buf) {
  T arg;
  std::memcpy(&arg, buf + sizeof(fuse_in_header), sizeof(arg));
  return arg;
}

}  // namespace

void set_wanted(bool w) {
  wanted.store(w, std::memory_order_relaxed);
}

void note_request(const void* data, size_t size) {
  current = Current{};
  if (size < sizeof(fuse_in_header)) return;
  const auto* buf = static_cast<const char*>(data);
  fuse_in_header in;
  std::memcpy(&in, buf, sizeof(in));
  switch (in.opcode) {
    case FUSE_WRITE:
      if (size >= sizeof(in) + sizeof(fuse_write_in)) {
        current.kills = (arg_of<fuse_write_in>(buf).write_flags & FUSE_WRITE_KILL_SUIDGID) != 0;
      }
      break;
    case FUSE_SETATTR:
      if (size >= sizeof(in) + sizeof(fuse_setattr_in)) {
        current.kills = (arg_of<fuse_setattr_in>(buf).valid & FATTR_KILL_SUIDGID) != 0;
      }
      break;
    case FUSE_GETXATTR:
      if (size > sizeof(in) + sizeof(fuse_getxattr_in)) {
        const char* name = buf + sizeof(in) + sizeof(fuse_getxattr_in);
        const size_t room = size - sizeof(in) - sizeof(fuse_getxattr_in);
        if (std::string_view(name, strnlen(name, room)) == "security.capability") {
          queries.fetch_add(1, std::memory_order_relaxed);
        }
      }
      break;
    case FUSE_INIT:
      // fuse_init_in's first four fields (major, minor, max_readahead, flags) are in every
      // protocol version that has the flag.
      if (size >= sizeof(in) + 4 * sizeof(uint32_t)) {
        uint32_t words[4];
        std::memcpy(words, buf + sizeof(in), sizeof(words));
        offered = words[0] == 7 && words[1] >= 33 && (words[3] & FUSE_HANDLE_KILLPRIV_V2) != 0;
        init_unique = in.unique;
      }
      break;
    default:
      break;
  }
}

void amend_reply(iovec* iov, int count) {
  constexpr size_t kFlagsAt = 3 * sizeof(uint32_t);  // fuse_init_out: major, minor, readahead
  if (count < 2 || iov[0].iov_len != sizeof(fuse_out_header) || init_unique.load() == 0) return;
  fuse_out_header out;
  std::memcpy(&out, iov[0].iov_base, sizeof(out));
  if (out.unique != init_unique.load() || out.error != 0) return;
  init_unique = 0;
  if (!offered.load() || !wanted.load() || iov[1].iov_len < kFlagsAt + sizeof(uint32_t) ||
      iov[1].iov_len > init_reply.size()) {
    return;
  }
  std::memcpy(init_reply.data(), iov[1].iov_base, iov[1].iov_len);
  uint32_t flags;
  std::memcpy(&flags, init_reply.data() + kFlagsAt, sizeof(flags));
  flags |= FUSE_HANDLE_KILLPRIV_V2;
  flags &= ~uint32_t{FUSE_HANDLE_KILLPRIV};  // never both
  std::memcpy(init_reply.data() + kFlagsAt, &flags, sizeof(flags));
  iov[1].iov_base = init_reply.data();
  on = true;
}

bool negotiated() {
  return on.load(std::memory_order_relaxed);
}
bool request_kills_suidgid() {
  return current.kills;
}
uint64_t capability_queries() {
  return queries.load(std::memory_order_relaxed);
}

}  // namespace stripefs::fs::killpriv
