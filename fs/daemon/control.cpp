#include "fs/daemon/control.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "fs/core/fs_log.hpp"

namespace stripefs::fs {

std::string control_answer(const std::string& line, const ControlServer::Handler& handler) {
  nlohmann::json reply;
  try {
    const nlohmann::json request = nlohmann::json::parse(line);
    if (!request.is_object() || !request.contains("command") || !request["command"].is_string()) {
      reply = {{"error", "a request is an object with a \"command\" string"}};
    } else {
      reply = handler(request);
    }
  } catch (const nlohmann::json::exception& e) {
    reply = {{"error", std::string("malformed request: ") + e.what()}};
  }
  return reply.dump() + "\n";
}

Result<std::unique_ptr<ControlServer>> ControlServer::start(const std::string& path,
                                                            Handler handler) {
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return fail(ec.value(), "{}: {}", dir.string(), ec.message());
  chmod(dir.c_str(), 0700);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path)) return fail(ENAMETOOLONG, "{}: path too long", path);
  std::strcpy(address.sun_path, path.c_str());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return fail(errno, "control socket: {}", strerror(errno));
  // A socket file left by a daemon that died is stale when nobody answers on it.
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) {
    close(fd);
    return fail(EADDRINUSE, "{}: another stripefs daemon serves this filesystem", path);
  }
  unlink(path.c_str());
  const mode_t old = umask(0177);
  const int bound = bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  umask(old);
  if (bound != 0 || listen(fd, 8) != 0) {
    const int e = errno;
    close(fd);
    return fail(e, "{}: {}", path, strerror(e));
  }
  std::unique_ptr<ControlServer> server(new ControlServer(path, fd, std::move(handler)));
  if (pipe2(server->wake_, O_CLOEXEC) != 0) return fail(errno, "pipe: {}", strerror(errno));
  server->thread_ = std::thread([s = server.get()] { s->serve(); });
  return server;
}

ControlServer::ControlServer(std::string path, int fd, Handler handler)
    : path_(std::move(path)), fd_(fd), handler_(std::move(handler)) {}

ControlServer::~ControlServer() {
  if (wake_[1] >= 0) (void)!write(wake_[1], "x", 1);
  if (thread_.joinable()) thread_.join();
  close(fd_);
  for (int f : wake_) {
    if (f >= 0) close(f);
  }
  unlink(path_.c_str());
}

// One client at a time: requests are rare and cheap, and a slow client only delays other
// clients, never the filesystem.
void ControlServer::serve() {
  for (;;) {
    pollfd fds[2] = {{fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    const int client = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    // The socket's mode keeps others out; its peer's credentials are checked all the same
    // (a descriptor passed on, a directory made wider by hand).
    ucred peer{};
    socklen_t length = sizeof(peer);
    if (getsockopt(client, SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0 || peer.uid != 0) {
      const std::string reply =
          nlohmann::json{{"error", "permission denied: only root may control stripefs"}}.dump() +
          "\n";
      (void)!send(client, reply.data(), reply.size(), MSG_NOSIGNAL);
      fs_log().warn("control: refused a client of uid {}", peer.uid);
      close(client);
      continue;
    }
    answer(client);
    close(client);
  }
}

void ControlServer::answer(int client) {
  std::string pending;
  char buffer[4096];
  for (;;) {
    pollfd fds[2] = {{client, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (poll(fds, 2, 10000) <= 0 || fds[1].revents != 0) return;  // idle clients are dropped
    const ssize_t n = read(client, buffer, sizeof(buffer));
    if (n <= 0) return;
    pending.append(buffer, static_cast<size_t>(n));
    if (pending.size() > (1u << 20)) return;
    for (size_t nl; (nl = pending.find('\n')) != std::string::npos;) {
      const std::string reply = control_answer(pending.substr(0, nl), handler_);
      pending.erase(0, nl + 1);
      if (send(client, reply.data(), reply.size(), MSG_NOSIGNAL) < 0) return;
    }
  }
}

}  // namespace stripefs::fs
