#include "fs/daemon/fuse_route.hpp"

namespace stripefs::fs::fuse_route {

namespace {

thread_local int worker_fd = -1;
thread_local int reply_scope_fd = -1;

}  // namespace

void set_worker(int fd) {
  worker_fd = fd;
}

int current() {
  return worker_fd;
}

int read_fd(int session_fd) {
  return worker_fd >= 0 ? worker_fd : session_fd;
}

int reply_fd(int session_fd) {
  if (reply_scope_fd >= 0) return reply_scope_fd;
  return worker_fd >= 0 ? worker_fd : session_fd;
}

Reply::Reply(int fd) : previous_(reply_scope_fd) {
  if (fd >= 0) reply_scope_fd = fd;
}

Reply::~Reply() {
  reply_scope_fd = previous_;
}

}  // namespace stripefs::fs::fuse_route
