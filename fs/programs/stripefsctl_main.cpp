// stripefsctl: asks a mounted stripefs daemon, over its control socket, how it is doing.
//
//   stripefsctl [--json] [--socket PATH] status|stats [MOUNTPOINT]
//
// Without --socket it finds the daemon by MOUNTPOINT among the sockets in /run/stripefs/
// (with one daemon running, MOUNTPOINT may be left out).
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fs/daemon/control.hpp"
#include "raid/units.hpp"

namespace {

using nlohmann::json;

int refuse(const std::string& message) {
  std::fprintf(stderr, "stripefsctl: %s\n", message.c_str());
  return 1;
}

// Sends one request and reads one reply line; empty on failure (with `error` set).
std::optional<json> ask(const std::string& socket_path, const std::string& command,
                        std::string& error) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, socket_path.c_str(), sizeof(address.sun_path) - 1);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    error = socket_path + ": " + std::strerror(errno);
    if (fd >= 0) close(fd);
    return std::nullopt;
  }
  const std::string request = json{{"command", command}}.dump() + "\n";
  std::string reply;
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) < 0) {
    error = socket_path + ": " + std::strerror(errno);
  } else {
    char buffer[65536];
    ssize_t n;
    while (reply.find('\n') == std::string::npos && (n = read(fd, buffer, sizeof(buffer))) > 0) {
      reply.append(buffer, static_cast<size_t>(n));
    }
  }
  close(fd);
  if (reply.empty()) {
    if (error.empty()) error = socket_path + ": no answer";
    return std::nullopt;
  }
  try {
    return json::parse(reply);
  } catch (const json::exception& e) {
    error = socket_path + ": malformed answer";
    return std::nullopt;
  }
}

void print_status(const json& s) {
  const json& a = s["array"];
  const json& f = s["filesystem"];
  std::printf("%s: stripefs %s%s\n", s["mountpoint"].get<std::string>().c_str(),
              f["uuid"].get<std::string>().c_str(),
              f["label"].get<std::string>().empty()
                  ? ""
                  : (" (" + f["label"].get<std::string>() + ")").c_str());
  std::printf("  array %s: %s, chunk %s, %s%s\n", a["uuid"].get<std::string>().c_str(),
              a["level"].get<std::string>().c_str(),
              stripefs::format_size(a["chunk_size"].get<uint64_t>()).c_str(),
              stripefs::format_size(a["size"].get<uint64_t>()).c_str(),
              a["failed"].get<bool>()     ? ", FAILED"
              : a["degraded"].get<bool>() ? ", degraded"
                                          : "");
  for (const json& m : a["members"]) {
    std::printf("    %u  %-8s %s\n", m["role"].get<unsigned>(),
                m["state"].get<std::string>().c_str(), m["device"].get<std::string>().c_str());
  }
  const std::string level = a["level"].get<std::string>();
  if (level == "raid5" || level == "raid6") {
    // value(): a daemon older than this stripefsctl does not report these.
    const std::string journal = a.value("write_hole_journal", std::string("none"));
    std::printf("  write hole: %s\n",
                journal == "none" ? "open (no write-hole journal; resync after a crash)"
                : !a.value("write_hole_logging", true)
                    ? "open (write_hole=open: this mount does not use the journal)"
                : journal == "members" ? "closed (journal mirrored on the first members)"
                                       : "closed (journal device)");
  }
  const json& r = a["resync"];
  if (!r["finished"].get<bool>()) {
    std::printf("  resync: %llu of %llu stripes\n", r["done"].get<unsigned long long>(),
                r["total"].get<unsigned long long>());
  }
  const uint64_t bs = f["block_size"].get<uint64_t>();
  const uint64_t blocks = f["blocks"].get<uint64_t>(), free = f["blocks_free"].get<uint64_t>();
  std::printf("  space: %s used of %s (%s free); inodes: %llu used of %llu\n",
              stripefs::format_size((blocks - free) * bs).c_str(),
              stripefs::format_size(blocks * bs).c_str(), stripefs::format_size(free * bs).c_str(),
              static_cast<unsigned long long>(f["inodes"].get<uint64_t>() -
                                              f["inodes_free"].get<uint64_t>()),
              f["inodes"].get<unsigned long long>());
}

void print_stats(const json& s) {
  for (const char* section : {"volume", "filesystem", "metadata", "write_hole_journal"}) {
    std::printf("%s:\n", section);
    for (const auto& [key, value] : s[section].items()) {
      std::printf("  %-24s %s\n", key.c_str(), value.dump().c_str());
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Query a mounted stripefs", "stripefsctl"};
  bool as_json = false;
  std::string socket_path, command, mountpoint;
  app.add_flag("--json", as_json, "print the daemon's JSON answer");
  app.add_option("--socket", socket_path, "the daemon's control socket");
  app.add_option("command", command, "status or stats")
      ->required()
      ->check(CLI::IsMember({"status", "stats"}));
  app.add_option("mountpoint", mountpoint, "the filesystem's mountpoint");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "stripefsctl: %s (see --help)\n", e.what());
    return 2;
  }
  std::string error;
  if (socket_path.empty()) {
    // Find the daemon that serves `mountpoint` (or the only one).
    std::string wanted;
    if (!mountpoint.empty()) {
      char resolved[PATH_MAX];
      if (realpath(mountpoint.c_str(), resolved) == nullptr) {
        return refuse(mountpoint + ": " + std::strerror(errno));
      }
      wanted = resolved;
    }
    std::vector<std::pair<std::string, std::string>> daemons;  // socket, mountpoint
    std::error_code ec;
    for (const auto& entry :
         std::filesystem::directory_iterator(stripefs::fs::kControlDirectory, ec)) {
      if (entry.path().extension() != ".sock") continue;
      std::string ignored;
      auto status = ask(entry.path(), "status", ignored);
      if (status && status->contains("mountpoint")) {
        daemons.emplace_back(entry.path(), (*status)["mountpoint"].get<std::string>());
      }
    }
    for (const auto& [sock, mnt] : daemons) {
      if (wanted.empty() ? daemons.size() == 1 : mnt == wanted) socket_path = sock;
    }
    if (socket_path.empty()) {
      if (daemons.empty()) return refuse("no stripefs daemon is running");
      if (wanted.empty()) return refuse("several stripefs filesystems are mounted: name one");
      return refuse(mountpoint + ": no stripefs daemon serves it");
    }
  }
  auto reply = ask(socket_path, command, error);
  if (!reply) return refuse(error);
  if (reply->contains("error")) return refuse((*reply)["error"].get<std::string>());
  if (as_json) {
    std::printf("%s\n", reply->dump(2).c_str());
  } else if (command == "status") {
    print_status(*reply);
  } else {
    print_stats(*reply);
  }
  return 0;
}
