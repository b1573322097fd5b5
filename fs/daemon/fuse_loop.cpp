#include "fs/daemon/fuse_loop.hpp"

#include <fcntl.h>
#include <linux/fuse.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "fs/core/fs_log.hpp"
#include "fs/daemon/fuse_route.hpp"
#include "raid/local_ring.hpp"

namespace stripefs::fs {

namespace {

// Sent to the workers when the loop ends, to end a read(2) or io_uring_enter they sleep in;
// its handler does nothing (and has no SA_RESTART), so the call returns EINTR.
constexpr int kWakeSignal = SIGUSR1;

// A clone of the session's descriptor: a connection's requests go to whichever clone reads
// first, and a reply must go back through the clone its request came from.
int clone_of(int session_fd, int flags, std::string& error) {
  const int fd = ::open("/dev/fuse", O_RDWR | O_CLOEXEC | flags);
  if (fd < 0) {
    error = std::string("opening /dev/fuse: ") + std::strerror(errno);
    return -1;
  }
  uint32_t master = static_cast<uint32_t>(session_fd);
  if (ioctl(fd, FUSE_DEV_IOC_CLONE, &master) != 0) {
    error = std::string("cloning the session's /dev/fuse: ") + std::strerror(errno);
    ::close(fd);
    return -1;
  }
  return fd;
}

struct Shared {
  fuse_session* session;
  int done_fd;  // an eventfd: a worker ended
  std::atomic<bool> failed{false};
  std::atomic<unsigned> ended{0};
};

// Reads one request from `fd` and answers it (its reply, or a read's later one, to `fd`).
// Returns what fuse_session_receive_buf did.
int take_request(fuse_session* session, int fd, fuse_buf& buf) {
  fuse_route::set_worker(fd);
  const int n = fuse_session_receive_buf(session, &buf);
  if (n > 0) fuse_session_process_buf(session, &buf);
  return n;
}

// One worker, over two clones of the session's descriptor: one read blocking while nothing
// of the worker's is in flight, one read without blocking while something is.
void serve(Shared& shared, int blocking_fd, int polled_fd) {
  fuse_session* session = shared.session;
  {
    LocalRing::Server server(polled_fd);
    fuse_buf buf{};  // libfuse allocates it, of the session's size, at the first read
    while (!fuse_session_exited(session)) {
      int n;
      if (!server.busy()) {
        n = take_request(session, blocking_fd, buf);
      } else {
        // Completions, a request, or a signal. Idle now: the blocking read takes what is
        // waiting. Still busy: the requests waiting are read without blocking, each one's
        // member I/O on its way before the next is read.
        (void)server.wait();
        if (!server.busy()) continue;
        while ((n = take_request(session, polled_fd, buf)) > 0) server.submit();
      }
      if (n > 0) {
        server.submit();
        continue;
      }
      // -EAGAIN: none waiting. 0: the session exited, or the kernel ended the connection
      // (libfuse exits the session then). -EINTR: a signal, or a request interrupted before
      // it was read.
      if (n == 0 || n == -EAGAIN || n == -EINTR) continue;
      fs_log().error("reading /dev/fuse: {}", std::strerror(-n));
      shared.failed = true;
      break;
    }
    std::free(buf.mem);
    fuse_route::set_worker(-1);
  }  // the Server's member I/O reaped: every reply sent
  fuse_session_exit(session);
  ++shared.ended;
  (void)eventfd_write(shared.done_fd, 1);
}

}  // namespace

bool own_loop_possible(fuse_session* session) {
  std::string error;
  const int clone = clone_of(fuse_session_fd(session), 0, error);
  if (clone < 0) {
    fs_log().warn("libfuse's loop, not the daemon's own: {}", error);
    return false;
  }
  bool possible;
  {
    LocalRing::Server probe(clone);
    possible = probe.ready();
  }
  ::close(clone);
  return possible;
}

int run_fuse_loop(fuse_session* session, unsigned threads) {
  const int session_fd = fuse_session_fd(session);
  std::vector<int> fds;
  auto close_all = [&] {
    for (int fd : fds) ::close(fd);
  };
  std::string error;
  for (unsigned i = 0; i < threads && error.empty(); ++i) {
    for (int flags : {0, O_NONBLOCK}) {
      const int fd = clone_of(session_fd, flags, error);
      if (fd < 0) break;
      fds.push_back(fd);
    }
  }
  Shared shared{session, eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)};
  if (shared.done_fd < 0 && error.empty()) error = std::string("eventfd: ") + std::strerror(errno);
  struct sigaction wake {
  }, previous{};
  wake.sa_handler = [](int) {};
  sigemptyset(&wake.sa_mask);
  if (error.empty() && sigaction(kWakeSignal, &wake, &previous) != 0) {
    error = std::string("the loop's wake-up signal: ") + std::strerror(errno);
  }
  if (!error.empty()) {
    fs_log().error("the FUSE loop: {}", error);
    close_all();
    if (shared.done_fd >= 0) ::close(shared.done_fd);
    return -1;
  }
  std::vector<std::thread> workers;
  for (unsigned i = 0; i < threads; ++i) {
    workers.emplace_back(serve, std::ref(shared), fds[2 * i], fds[2 * i + 1]);
  }
  // This thread waits for the session's end: a worker ending says so, and a signal that
  // exited the session on another thread is seen within a second.
  while (!fuse_session_exited(session) && shared.ended.load() == 0) {
    pollfd done{shared.done_fd, POLLIN, 0};
    (void)::poll(&done, 1, 1000);
  }
  fuse_session_exit(session);
  // Workers asleep in read(2) or on their rings are woken until every one has ended (one
  // between its look at the session and its sleep would miss a single signal).
  while (shared.ended.load() < threads) {
    for (std::thread& w : workers) pthread_kill(w.native_handle(), kWakeSignal);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (std::thread& w : workers) w.join();
  sigaction(kWakeSignal, &previous, nullptr);
  close_all();
  ::close(shared.done_fd);
  return shared.failed ? -1 : 0;
}

}  // namespace stripefs::fs
