// stripefsctl: asks a mounted stripefs daemon, over its control socket, how it is doing, and
// tells it what to do on the day a disk dies.
//
//   stripefsctl [--json] [--socket PATH] status [--wait] [MOUNTPOINT]
//   stripefsctl [--json] [--socket PATH] stats [MOUNTPOINT]
//   stripefsctl [--json] [--socket PATH] iostat [--interval SEC [--count N]] [MOUNTPOINT]
//   stripefsctl fail MOUNTPOINT MEMBER          stripefsctl remove MOUNTPOINT MEMBER
//   stripefsctl add [--force] MOUNTPOINT DEVICE stripefsctl rebuild MOUNTPOINT
//   stripefsctl re-add MOUNTPOINT DEVICE
//   stripefsctl replace [--force] MOUNTPOINT MEMBER DEVICE
//   stripefsctl speed MOUNTPOINT [--min SIZE] [--max SIZE]
//   stripefsctl log-level MOUNTPOINT LEVEL
//   stripefsctl scrub start|stop|status [--repair] [--wait] MOUNTPOINT
//
// Without --socket it finds the daemon by MOUNTPOINT among the sockets in /run/stripefs/
// (with one daemon running, status, stats and iostat may leave MOUNTPOINT out).
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <CLI/CLI.hpp>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fs/daemon/control.hpp"
#include "fs/daemon/iostat_view.hpp"
#include "raid/units.hpp"

namespace {

using nlohmann::json;

int refuse(const std::string& message) {
  std::fprintf(stderr, "stripefsctl: %s\n", message.c_str());
  return 1;
}

// Sends one request and reads one reply line; empty on failure (with `error` set).
std::optional<json> ask(const std::string& socket_path, const json& message, std::string& error) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, socket_path.c_str(), sizeof(address.sun_path) - 1);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    error = errno == EACCES || errno == EPERM
                ? "permission denied: only root may control stripefs (" + socket_path + ")"
                : socket_path + ": " + std::strerror(errno);
    if (fd >= 0) close(fd);
    return std::nullopt;
  }
  const std::string request = message.dump() + "\n";
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

std::string duration(uint64_t seconds) {
  char text[32];
  if (seconds >= 3600) {
    std::snprintf(text, sizeof(text), "%llu:%02llu:%02llu",
                  static_cast<unsigned long long>(seconds / 3600),
                  static_cast<unsigned long long>(seconds / 60 % 60),
                  static_cast<unsigned long long>(seconds % 60));
  } else {
    std::snprintf(text, sizeof(text), "%llu:%02llu", static_cast<unsigned long long>(seconds / 60),
                  static_cast<unsigned long long>(seconds % 60));
  }
  return text;
}

// "rebuild of role 1: 45.2% (1.2G of 2.5G), 210M/s, 0:12 left", or "" without a task.
std::string task_line(const json& task) {
  if (task.is_null()) return "";
  const uint64_t done = task["done"].get<uint64_t>(), total = task["total"].get<uint64_t>();
  std::string line = task["kind"].get<std::string>();
  if (!task["role"].is_null()) line += " of role " + std::to_string(task["role"].get<unsigned>());
  char figures[160];
  std::snprintf(figures, sizeof(figures), ": %.1f%% (%s of %s)",
                total > 0 ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 0.0,
                stripefs::format_size(done).c_str(), stripefs::format_size(total).c_str());
  line += figures;
  if (task["rate"].is_number()) {
    line += ", " + stripefs::format_size(task["rate"].get<uint64_t>()) + "/s";
  }
  if (task["eta_seconds"].is_number()) {
    line += ", " + duration(task["eta_seconds"].get<uint64_t>()) + " left";
  }
  return line;
}

// "scrub: finished 2026-12-02T16:40:01Z after 12 s: 24 of 24 stripes checked, 1 inconsistent,
// 1 repaired, 0 unrepairable", what was found bad and what checksums said, then a line per
// member with chunks named bad.
void print_scrub(const json& scrub, const char* indent) {
  if (scrub.is_null()) {
    std::printf("%sscrub: none has run since the mount\n", indent);
    return;
  }
  const bool repair = scrub["repair"].get<bool>();
  if (scrub.value("before_mount", false)) {
    // What the superblocks recorded of the last scrub of an earlier mount.
    std::printf(
        "%sscrub: the last one finished %s (before this mount): %llu inconsistent, %llu "
        "repaired, %llu unrepairable\n",
        indent, scrub["ended"].get<std::string>().c_str(),
        scrub["mismatched"].get<unsigned long long>(), scrub["repaired"].get<unsigned long long>(),
        scrub["unrepairable"].get<unsigned long long>());
    return;
  }
  std::string when;
  if (scrub["running"].get<bool>()) {
    when = repair ? "running (repairing)" : "running";
    if (const auto from = scrub.value("resumed_from", uint64_t{0}); from > 0) {
      when += ", resumed at stripe " + std::to_string(from);
    }
  } else {
    when = std::string(scrub["error"].is_string()     ? "failed"
                       : scrub["stopped"].get<bool>() ? "stopped"
                                                      : "finished") +
           (repair ? " (repairing)" : "") + " " + scrub["ended"].get<std::string>() + " after " +
           duration(static_cast<uint64_t>(scrub["seconds"].get<double>()));
  }
  std::printf(
      "%sscrub: %s: %llu of %llu stripes checked, %llu inconsistent, %llu repaired, "
      "%llu unrepairable\n",
      indent, when.c_str(), scrub["done"].get<unsigned long long>(),
      scrub["total"].get<unsigned long long>(), scrub["mismatched"].get<unsigned long long>(),
      scrub["repaired"].get<unsigned long long>(), scrub["unrepairable"].get<unsigned long long>());
  std::printf("%s  bad chunks: %llu data, %llu parity; ", indent,
              scrub["bad_data"].get<unsigned long long>(),
              scrub["bad_parity"].get<unsigned long long>());
  if (scrub["checksums"].get<bool>()) {
    std::printf("%llu blocks checked against their checksums, %llu failed\n",
                scrub["verified_blocks"].get<unsigned long long>(),
                scrub["checksum_failures"].get<unsigned long long>());
  } else {
    std::printf("no checksums (redundancy only)\n");
  }
  if (scrub["error"].is_string()) {
    std::printf("%s  error: %s\n", indent, scrub["error"].get<std::string>().c_str());
  }
  for (const json& bad : scrub["bad_chunks"]) {
    std::printf("%s  role %u (%s): %llu bad chunk(s)\n", indent, bad["role"].get<unsigned>(),
                bad["path"].get<std::string>().c_str(), bad["count"].get<unsigned long long>());
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
  std::printf("  array %s: %s, chunk %s, %s\n", a["uuid"].get<std::string>().c_str(),
              a["level"].get<std::string>().c_str(),
              stripefs::format_size(a["chunk_size"].get<uint64_t>()).c_str(),
              stripefs::format_size(a["size"].get<uint64_t>()).c_str());
  std::printf("  state: %s\n", s.value("state", std::string("unknown")).c_str());
  std::printf("    %-5s %-11s %8s %8s %6s %5s %5s  %s\n", "ROLE", "STATE", "READ", "WRITTEN",
              "ERRORS", "FIXED", "CKSUM", "DEVICE");
  for (const json& m : s["members"]) {
    const std::string role = m["role"].is_null() ? "-" : std::to_string(m["role"].get<unsigned>());
    std::printf(
        "    %-5s %-11s %8s %8s %6s %5s %5s  %s\n", role.c_str(),
        m["state"].get<std::string>().c_str(),
        m.contains("read_bytes") ? stripefs::format_size(m["read_bytes"].get<uint64_t>()).c_str()
                                 : "-",
        m.contains("written_bytes")
            ? stripefs::format_size(m["written_bytes"].get<uint64_t>()).c_str()
            : "-",
        m.contains("errors") ? std::to_string(m["errors"].get<uint64_t>()).c_str() : "-",
        m.contains("corrected") ? std::to_string(m["corrected"].get<uint64_t>()).c_str() : "-",
        m.contains("checksum_errors") ? std::to_string(m["checksum_errors"].get<uint64_t>()).c_str()
                                      : "-",
        m["path"].get<std::string>().c_str());
  }
  if (const std::string task = task_line(s["task"]); !task.empty()) {
    std::printf("  task: %s\n", task.c_str());
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
  const uint64_t bs = f["block_size"].get<uint64_t>();
  const uint64_t blocks = f["blocks"].get<uint64_t>(), free = f["blocks_free"].get<uint64_t>();
  std::printf("  space: %s used of %s (%s free); inodes: %llu used of %llu\n",
              stripefs::format_size((blocks - free) * bs).c_str(),
              stripefs::format_size(blocks * bs).c_str(), stripefs::format_size(free * bs).c_str(),
              static_cast<unsigned long long>(f["inodes"].get<uint64_t>() -
                                              f["inodes_free"].get<uint64_t>()),
              f["inodes"].get<unsigned long long>());
  if (s.contains("scrub") && !s["scrub"].is_null()) print_scrub(s["scrub"], "  ");
  for (const json& note : s.value("notes", json::array())) {
    std::printf("  note: %s\n", note.get<std::string>().c_str());
  }
  if (const std::string action = s.value("action", std::string()); !action.empty()) {
    std::printf("  action: %s\n", action.c_str());
  }
}

void print_stats(const json& s) {
  for (const char* section :
       {"volume", "fuse", "filesystem", "metadata", "write_hole_journal", "io"}) {
    if (!s.contains(section)) continue;  // a daemon from before the group
    std::printf("%s:\n", section);
    for (const auto& [key, value] : s[section].items()) {
      std::printf("  %-24s %s\n", key.c_str(), value.dump().c_str());
    }
  }
}

// iostat: once, the counters since the mount; with an interval, what each interval added.
int run_iostat(const std::string& socket_path, double interval, unsigned count, bool as_json) {
  using stripefs::fs::add_iostat_ratios;
  std::string error;
  const json request = {{"command", "iostat"}};
  auto before = ask(socket_path, request, error);
  if (!before) return refuse(error);
  if (before->contains("error")) return refuse((*before)["error"].get<std::string>());
  if (interval <= 0) {
    json totals = *before;
    add_iostat_ratios(totals);
    if (as_json) {
      std::printf("%s\n", totals.dump(2).c_str());
    } else {
      stripefs::fs::print_iostat(totals, "since the mount:");
    }
    return 0;
  }
  const auto period = std::chrono::duration<double>(interval);
  auto next = std::chrono::steady_clock::now();
  for (unsigned n = 0; count == 0 || n < count; ++n) {
    next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(period);
    std::this_thread::sleep_until(next);
    auto now = ask(socket_path, request, error);
    if (!now) return refuse(error);
    if (now->contains("error")) return refuse((*now)["error"].get<std::string>());
    json delta = stripefs::fs::iostat_delta(*now, *before);
    add_iostat_ratios(delta);
    if (as_json) {
      std::printf("%s\n", delta.dump().c_str());  // one line per interval
    } else {
      stripefs::fs::print_iostat(delta, fmt::format("over the last {:g} s:", interval));
      std::printf("\n");
    }
    std::fflush(stdout);
    before = std::move(now);
  }
  return 0;
}

// One step of a wait: a progress bar redrawn on a terminal, a line every few seconds
// otherwise (none with --json).
void show_progress(uint64_t done, uint64_t total, const std::string& line, bool tty, bool as_json,
                   std::chrono::steady_clock::time_point& last_line) {
  const auto now = std::chrono::steady_clock::now();
  if (tty) {
    constexpr int kWidth = 30;
    const int filled = total > 0 ? static_cast<int>(kWidth * done / total) : 0;
    std::printf("\r\033[K[%s%s] %s", std::string(filled, '#').c_str(),
                std::string(kWidth - filled, '.').c_str(), line.c_str());
    std::fflush(stdout);
  } else if (now - last_line >= std::chrono::seconds(5) && !as_json) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
    last_line = now;
  }
}

// Follows the running task until it ends: a progress bar on a terminal, a line every few
// seconds otherwise. Exits 0 when the array is clean or degraded without a failed task, 1
// when the task failed or the array failed.
int wait_for_task(const std::string& socket_path, bool as_json) {
  const bool tty = isatty(STDOUT_FILENO) != 0;
  auto last_line = std::chrono::steady_clock::time_point{};
  for (;;) {
    std::string error;
    auto s = ask(socket_path, json{{"command", "status"}}, error);
    if (!s) return refuse(error);
    if (s->contains("error")) return refuse((*s)["error"].get<std::string>());
    const json& task = (*s)["task"];
    if (task.is_null()) {
      if (tty) std::printf("\r\033[K");
      const std::string state = s->value("state", std::string("unknown"));
      const json& failure = (*s)["rebuild_error"];
      if (as_json) {
        std::printf("%s\n", s->dump(2).c_str());
      } else {
        std::printf(
            "%s: %s%s\n", (*s)["mountpoint"].get<std::string>().c_str(), state.c_str(),
            failure.is_string() ? (" (stopped: " + failure.get<std::string>() + ")").c_str() : "");
      }
      return state == "failed" || failure.is_string() ? 1 : 0;
    }
    show_progress(task["done"].get<uint64_t>(), task["total"].get<uint64_t>(), task_line(task), tty,
                  as_json, last_line);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

// Follows the running scrub until it ends, as wait_for_task follows a task, then prints what
// it found. Exits 1 if it failed or was stopped, 0 otherwise.
int wait_for_scrub(const std::string& socket_path, bool as_json) {
  const bool tty = isatty(STDOUT_FILENO) != 0;
  auto last_line = std::chrono::steady_clock::time_point{};
  for (;;) {
    std::string error;
    auto reply = ask(socket_path, json{{"command", "scrub"}, {"action", "status"}}, error);
    if (!reply) return refuse(error);
    if (reply->contains("error")) return refuse((*reply)["error"].get<std::string>());
    const json& scrub = (*reply)["scrub"];
    if (scrub.is_null() || !scrub["running"].get<bool>()) {
      if (tty) std::printf("\r\033[K");
      if (as_json) {
        std::printf("%s\n", reply->dump(2).c_str());
      } else {
        print_scrub(scrub, "");
      }
      return scrub.is_null() || scrub["error"].is_string() || scrub["stopped"].get<bool>() ? 1 : 0;
    }
    const uint64_t done = scrub["done"].get<uint64_t>(), total = scrub["total"].get<uint64_t>();
    const std::string line = "scrub: " + std::to_string(done) + " of " + std::to_string(total) +
                             " stripes, " + std::to_string(scrub["mismatched"].get<uint64_t>()) +
                             " inconsistent";
    show_progress(done, total, line, tty, as_json, last_line);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

// Finds the daemon that serves `mountpoint` (or the only one); "" and `error` set if none.
std::string find_socket(const std::string& mountpoint, std::string& error) {
  std::string wanted;
  if (!mountpoint.empty()) {
    char resolved[PATH_MAX];
    if (realpath(mountpoint.c_str(), resolved) == nullptr) {
      error = mountpoint + ": " + std::strerror(errno);
      return "";
    }
    wanted = resolved;
  }
  std::vector<std::pair<std::string, std::string>> daemons;  // socket, mountpoint
  std::error_code ec;
  for (const auto& entry :
       std::filesystem::directory_iterator(stripefs::fs::kControlDirectory, ec)) {
    if (entry.path().extension() != ".sock") continue;
    std::string ignored;
    auto status = ask(entry.path(), json{{"command", "status"}}, ignored);
    if (status && status->contains("mountpoint")) {
      daemons.emplace_back(entry.path(), (*status)["mountpoint"].get<std::string>());
    }
  }
  if (ec == std::errc::permission_denied) {
    error = "permission denied: only root may control stripefs";
    return "";
  }
  for (const auto& [sock, mnt] : daemons) {
    if (wanted.empty() ? daemons.size() == 1 : mnt == wanted) return sock;
  }
  if (daemons.empty()) {
    error = "no stripefs daemon is running";
  } else if (wanted.empty()) {
    error = "several stripefs filesystems are mounted: name one";
  } else {
    error = mountpoint + ": no stripefs daemon serves it";
  }
  return "";
}

// What a command the daemon carried out did, in a line.
void print_done(const std::string& command, const json& reply, const std::string& mountpoint) {
  if (command == "fail" && reply.value("replace_stopped", false)) {
    std::printf("the replace of role %u stopped; the old device serves on\n",
                reply["role"].get<unsigned>());
  } else if (command == "replace") {
    std::printf(
        "replacing role %u (%s) by %s: the old device serves until the copy is "
        "complete (stripefsctl status --wait %s)\n",
        reply["role"].get<unsigned>(), reply["old"].get<std::string>().c_str(),
        reply["device"].get<std::string>().c_str(), mountpoint.c_str());
  } else if (command == "fail") {
    std::printf("role %u failed; the array runs degraded (stripefsctl status %s)\n",
                reply["role"].get<unsigned>(), mountpoint.c_str());
  } else if (command == "remove") {
    std::printf("%s removed\n", reply.contains("spare")
                                    ? ("spare " + reply["spare"].get<std::string>()).c_str()
                                    : reply["device"].get<std::string>().c_str());
  } else if (command == "add") {
    if (reply.contains("rebuilding")) {
      std::printf("%s added: rebuilding role %u onto it (stripefsctl status --wait %s)\n",
                  reply["device"].get<std::string>().c_str(), reply["rebuilding"].get<unsigned>(),
                  mountpoint.c_str());
    } else {
      std::printf("%s added as a spare\n", reply["device"].get<std::string>().c_str());
    }
  } else if (command == "re-add") {
    std::printf(
        "%s re-added as role %u: rebuilding what it missed (stripefsctl status --wait %s)\n",
        reply["device"].get<std::string>().c_str(), reply["rebuilding"].get<unsigned>(),
        mountpoint.c_str());
  } else if (command == "rebuild") {
    std::printf("%s\n", reply.value("running", false) && reply["roles"].empty()
                            ? "a rebuild is running already"
                            : ("rebuilding role(s) " + reply["roles"].dump()).c_str());
  } else if (command == "speed") {
    const uint64_t max = reply["max"].get<uint64_t>();
    std::printf("rebuild speed: %s/s with other I/O, %s idle\n",
                stripefs::format_size(reply["min"].get<uint64_t>()).c_str(),
                max == 0 ? "no limit" : (stripefs::format_size(max) + "/s").c_str());
  } else if (command == "log-level") {
    std::printf("log level: %s\n", reply["level"].get<std::string>().c_str());
  } else if (command == "scrub") {
    print_scrub(reply["scrub"], "");
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Query and manage a mounted stripefs", "stripefsctl"};
  app.require_subcommand(1);
  bool as_json = false, wait = false, force = false;
  std::string socket_path, mountpoint, member, device, level, min_text, max_text;
  app.add_flag("--json", as_json, "print the daemon's JSON answer");
  app.add_option("--socket", socket_path, "the daemon's control socket");
  auto* status = app.add_subcommand("status", "the array's state, members, task and usage");
  status->add_flag("--wait", wait, "follow the running task until it ends (exit 1 if it fails)");
  status->add_option("mountpoint", mountpoint, "the filesystem's mountpoint");
  auto* stats = app.add_subcommand("stats", "I/O statistics");
  stats->add_option("mountpoint", mountpoint, "the filesystem's mountpoint");
  auto* iostat = app.add_subcommand(
      "iostat",
      "each member's request sizes, merges and alignment, and the volume's full-stripe and "
      "read-modify-write counts");
  double interval = 0;
  unsigned count = 0;
  iostat->add_option("-i,--interval", interval,
                     "report every SEC seconds what the interval added (default: once, the "
                     "counts since the mount)");
  iostat->add_option("-c,--count", count,
                     "with --interval: stop after N reports (default: until interrupted)");
  iostat->add_option("mountpoint", mountpoint, "the filesystem's mountpoint");
  auto* fail = app.add_subcommand("fail", "take a member out of service (md's --fail)");
  auto* remove = app.add_subcommand("remove", "forget a spare or a failed member");
  for (auto* sub : {fail, remove}) {
    sub->add_option("mountpoint", mountpoint, "the filesystem's mountpoint")->required();
    sub->add_option("member", member, "the member's device path or role number")->required();
  }
  auto* add = app.add_subcommand("add",
                                 "add a device: rebuilt onto at once if a role is out "
                                 "of service, else kept as a spare");
  add->add_flag("--force", force, "take a device that holds another filesystem or array");
  add->add_option("mountpoint", mountpoint, "the filesystem's mountpoint")->required();
  add->add_option("device", device, "the new device")->required();
  auto* readd = app.add_subcommand(
      "re-add",
      "bring back a member that failed or was away; only what the bitmap recorded "
      "since is rebuilt (md's --re-add)");
  readd->add_option("mountpoint", mountpoint, "the filesystem's mountpoint")->required();
  readd->add_option("device", device, "the member's device")->required();
  auto* replace = app.add_subcommand(
      "replace",
      "hot-replace a member in service by a new device: the member serves while it is "
      "copied, and leaves once the copy is complete (md's --replace)");
  replace->add_flag("--force", force, "take a device that holds another filesystem or array");
  replace->add_option("mountpoint", mountpoint, "the filesystem's mountpoint")->required();
  replace->add_option("member", member, "the member's device path or role number")->required();
  replace->add_option("device", device, "the new device (or a spare)")->required();
  auto* rebuild = app.add_subcommand("rebuild", "start a rebuild onto a spare, or resume one");
  rebuild->add_option("mountpoint", mountpoint, "the filesystem's mountpoint")->required();
  auto* speed = app.add_subcommand("speed", "the rebuild's rate limits (per second)");
  speed->add_option("mountpoint", mountpoint, "the filesystem's mountpoint")->required();
  speed->add_option("--min", min_text, "while the array has other I/O (md's speed_limit_min)");
  speed->add_option("--max", max_text, "while it has none; 0: no limit (speed_limit_max)");
  auto* log_level = app.add_subcommand("log-level", "the daemon's log level");
  log_level->add_option("mountpoint", mountpoint, "the filesystem's mountpoint")->required();
  log_level->add_option("level", level, "trace, debug, info, warn, error, critical or off")
      ->required();
  auto* scrub = app.add_subcommand(
      "scrub",
      "check every stripe's redundancy, and file data and metadata against their checksums, "
      "in the background; with --repair, rewrite the chunks named bad");
  std::string scrub_action;
  bool repair = false;
  scrub->add_option("action", scrub_action, "start, stop or status")
      ->required()
      ->check(CLI::IsMember({"start", "stop", "status"}));
  scrub->add_option("mountpoint", mountpoint, "the filesystem's mountpoint")->required();
  scrub->add_flag("--repair", repair, "start: rewrite the bad chunks found (default: check only)");
  scrub->add_flag("--wait", wait,
                  "start, status: follow the scrub until it ends (exit 1 if it "
                  "fails or is stopped)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "stripefsctl: %s (see --help)\n", e.what());
    return 2;
  }
  const std::string command = app.get_subcommands().front()->get_name();
  json request = {{"command", command}};
  if (command == "fail" || command == "remove" || command == "replace") {
    request["member"] = member;
  }
  if (command == "add" || command == "re-add" || command == "replace") {
    char resolved[PATH_MAX];
    request["device"] = realpath(device.c_str(), resolved) != nullptr ? resolved : device;
    if (command != "re-add") request["force"] = force;
  }
  if (command == "speed") {
    if (!min_text.empty()) request["min"] = min_text;
    if (!max_text.empty()) request["max"] = max_text;
  }
  if (command == "log-level") request["level"] = level;
  if (command == "iostat") {
    if (iostat->count("--interval") > 0 && !(interval > 0 && interval <= 86400)) {
      return refuse(
          fmt::format("iostat: --interval {:g}: not a number of seconds above 0, up "
                      "to a day",
                      interval));
    }
    if (iostat->count("--count") > 0 && iostat->count("--interval") == 0) {
      return refuse("iostat: --count goes with --interval");
    }
    if (iostat->count("--count") > 0 && count == 0) {
      return refuse("iostat: --count 0: leave --count out to report until interrupted");
    }
  }
  if (command == "scrub") {
    if (repair && scrub_action != "start") return refuse("scrub: --repair goes with start");
    if (wait && scrub_action == "stop") return refuse("scrub: --wait goes with start or status");
    request["action"] = scrub_action;
    request["repair"] = repair;
  }

  std::string error;
  if (socket_path.empty()) {
    if (access(stripefs::fs::kControlDirectory, X_OK) != 0 && (errno == EACCES || errno == EPERM)) {
      return refuse("permission denied: only root may control stripefs");
    }
    socket_path = find_socket(mountpoint, error);
    if (socket_path.empty()) return refuse(error);
  }
  if (command == "status" && wait) return wait_for_task(socket_path, as_json);
  if (command == "iostat") return run_iostat(socket_path, interval, count, as_json);
  if (command == "scrub" && scrub_action == "status" && wait) {
    return wait_for_scrub(socket_path, as_json);
  }
  auto reply = ask(socket_path, request, error);
  if (!reply) return refuse(error);
  if (reply->contains("error")) return refuse((*reply)["error"].get<std::string>());
  if (command == "scrub" && wait) return wait_for_scrub(socket_path, as_json);
  if (as_json) {
    std::printf("%s\n", reply->dump(2).c_str());
  } else if (command == "status") {
    print_status(*reply);
  } else if (command == "stats") {
    print_stats(*reply);
  } else {
    print_done(command, *reply, mountpoint);
  }
  return 0;
}
