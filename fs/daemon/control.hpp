// The daemon's control socket: a Unix stream socket in /run/stripefs/ (root only) that
// takes one JSON request per line and answers each with one JSON line.
//
//   {"command": "status"}   state, members, task, action; array, filesystem usage
//   {"command": "stats"}    I/O statistics: volume, filesystem, metadata journal
//   and the array commands of array_control.hpp (fail, remove, add, rebuild, speed, ...)
//
// An unknown command or a malformed line gets {"error": "..."} and the connection stays
// open. Only root is answered: the socket is 0600 in a 0700 directory, and a peer whose
// credentials (SO_PEERCRED) are not root's gets {"error": "permission denied: ..."} and is
// hung up on. stripefsctl is the client.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include "raid/result.hpp"

namespace stripefs::fs {

constexpr const char* kControlDirectory = "/run/stripefs";

class ControlServer {
 public:
  using Handler = std::function<nlohmann::json(const nlohmann::json& request)>;
  // Listens on `path` (replacing a stale socket there) and answers with `handler`, on a
  // thread of its own. The directory is created 0700 and the socket 0600.
  static Result<std::unique_ptr<ControlServer>> start(const std::string& path, Handler handler);
  ~ControlServer();  // stops listening and removes the socket
  const std::string& path() const { return path_; }

 private:
  ControlServer(std::string path, int fd, Handler handler);
  void serve();
  void answer(int client);
  std::string path_;
  int fd_;
  int wake_[2] = {-1, -1};  // a pipe that ends serve()
  Handler handler_;
  std::thread thread_;
};

// Answers one request line (exposed for tests).
std::string control_answer(const std::string& line, const ControlServer::Handler& handler);

}  // namespace stripefs::fs
