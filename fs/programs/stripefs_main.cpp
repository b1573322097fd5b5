// stripefs: assembles an array and mounts its filesystem through FUSE.
//
//   stripefs [-f] [-d] [-s] [-o OPTIONS] DEVICE[:DEVICE...]|UUID=uuid [DEVICE...] MOUNTPOINT
//
// Works as `mount -t fuse.stripefs SOURCE MOUNTPOINT` and from /etc/fstab (mount.fuse3 calls
// it with the source, the mountpoint and -o). Without -f it daemonizes, but only once the
// filesystem is mounted: every error before that reaches the caller's terminal.
#include <fcntl.h>
#include <spdlog/sinks/syslog_sink.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "fs/core/fs_log.hpp"
#include "fs/daemon/array_control.hpp"
#include "fs/daemon/control.hpp"
#include "fs/daemon/fuse_loop.hpp"
#include "fs/daemon/fuse_ops.hpp"
#include "fs/daemon/iostat.hpp"
#include "fs/daemon/killpriv_v2.hpp"
#include "fs/daemon/mount_options.hpp"
#include "fs/daemon/status.hpp"
#include "fs/daemon/tmpfile_op.hpp"
#include "journal/journal_log.hpp"
#include "journal/open_array.hpp"
#include "raid/array.hpp"
#include "raid/log.hpp"
#include "raid/member_devices.hpp"
#include "raid/units.hpp"

namespace {

using namespace stripefs;

// Streaming reads come in readahead-sized batches: the kernel gives a FUSE mount 128K, and
// btrfs gives itself 4M. Ours is set through the mount's bdi in sysfs (root only).
void set_readahead(const std::string& mountpoint, uint64_t bytes) {
  // The device number comes from mountinfo: a stat() of the mountpoint would wait for this
  // very daemon, whose loop has not started yet.
  std::ifstream info("/proc/self/mountinfo");
  std::string line, device;
  while (std::getline(info, line)) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, point;
    fields >> id >> parent >> dev >> root >> point;
    if (point == mountpoint) device = dev;  // the last one mounted there is ours
  }
  if (device.empty()) return;
  const std::string path = "/sys/class/bdi/" + device + "/read_ahead_kb";
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    fs_log().warn("{}: cannot set readahead: {}", path, std::strerror(errno));
    return;
  }
  std::fprintf(f, "%llu\n", static_cast<unsigned long long>(bytes / 1024));
  if (std::fclose(f) != 0) fs_log().warn("{}: cannot set readahead", path);
}

// libfuse reports bad options and mount failures through its log, in lines of its own. While
// it parses and mounts, they are kept here instead, to go into the one line we print.
std::string fuse_complaint;  // as libfuse wrote it: a line may come in several pieces

void keep_fuse_complaint(enum fuse_log_level level, const char* format, va_list ap) {
  if (level > FUSE_LOG_ERR) return;
  char piece[1024];
  std::vsnprintf(piece, sizeof(piece), format, ap);
  fuse_complaint += piece;
}

// What libfuse said since the last call, its lines joined by "; ".
std::string take_fuse_complaint() {
  std::string said;
  std::istringstream lines(fuse_complaint);
  fuse_complaint.clear();
  for (std::string line; std::getline(lines, line);) {
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    if (line.starts_with("fuse: ")) line.erase(0, 6);
    if (line.empty()) continue;
    said += (said.empty() ? "" : "; ") + line;
  }
  return said;
}

// "WHAT" or "WHAT: what libfuse said".
std::string with_fuse_complaint(const std::string& what) {
  const std::string said = take_fuse_complaint();
  return said.empty() ? what : what + ": " + said;
}

int fail_line(const std::string& message) {
  std::fprintf(stderr, "stripefs: %s\n", message.c_str());
  return 1;
}

// Writes the outcome to the waiting parent (daemon mode), once.
struct Launch {
  int fd = -1;
  // The error line first, then the parent told: it exits as soon as it hears, and whoever
  // started it reads the line from the stderr they share.
  int fail(const std::string& error) {
    const int status = fail_line(error);
    report(error);
    return status;
  }
  void report(const std::string& error) {
    if (fd < 0) return;
    const std::string line = error.empty() ? "ok\n" : error + "\n";
    (void)!::write(fd, line.data(), line.size());
    close(fd);
    fd = -1;
  }
};

int run(fs::MountOptions& config, fuse_args& args, Launch& launch) {
  const std::string mountpoint = config.mountpoint;
  std::vector<std::string> paths;
  if (const auto uuid = source_array_uuid(config.sources)) {
    auto found = find_array_members(*uuid);
    if (!found) return launch.fail(found.error().message);
    paths = *found;
  } else {
    paths = split_device_list(config.sources);
  }
  const fs::FsOptions fs_options = config.fs;
  const uint64_t readahead = config.readahead;
  if (config.io_threads == 0) config.io_threads = fs::default_io_threads();
  std::string error;
  // Not /dev/fd/N: that is a /dev/fuse descriptor a privileged helper opened and mounted.
  const bool check_mountpoint = error.empty() && !mountpoint.starts_with("/dev/fd/");
  struct stat point {};
  if (check_mountpoint && ::stat(mountpoint.c_str(), &point) != 0) {
    error = fmt::format("mountpoint {}: {}", mountpoint, std::strerror(errno));
  } else if (check_mountpoint && !S_ISDIR(point.st_mode)) {
    error = fmt::format("mountpoint {}: not a directory", mountpoint);
  }
  if (!error.empty()) return launch.fail(error);

  // FUSE's options are checked before the array is assembled: a refused mount changes
  // nothing on the members.
  fs::FuseContext context;
  context.writeback_cache = config.writeback_cache;
  context.direct_io = config.direct_io;
  context.posix_acl = config.posix_acl;
  // The kernel checks permissions from the mode bits, as on any local filesystem.
  fuse_opt_add_arg(&args, "-odefault_permissions");
  // The mount's name (mount(8), df, findmnt) and type: the user's, when given.
  if (!config.fsname_given) {
    fuse_opt_add_arg(&args, fmt::format("-ofsname={}", paths.front()).c_str());
  }
  if (!config.subtype_given) fuse_opt_add_arg(&args, "-osubtype=stripefs");
  const fuse_lowlevel_ops ops = fs::fuse_operations();
  std::unique_ptr<fuse_session, void (*)(fuse_session*)> session(
      fuse_session_new(&args, &ops, sizeof(ops), &context), fuse_session_destroy);
  if (session == nullptr) {
    error = with_fuse_complaint("bad FUSE options") + " (see stripefs --help)";
    return launch.fail(error);
  }
  context.session = session.get();
  fuse_set_log_func(nullptr);  // from here on libfuse logs as it does

  const std::string journal = config.journal_device;
  auto devices = open_devices(paths, journal, config.backend);
  if (!devices) return launch.fail(devices.error().message);
  ArraySetup setup;
  setup.force = config.force;
  setup.log_partial_stripes = config.log_partial_stripes;
  setup.journal_device = (*devices)->journal.get();
  setup.engine = (*devices)->engine.get();
  // In force before a rebuild resumed at the open takes its first step.
  setup.speed_min = config.speed_limit_min;
  setup.speed_max = config.speed_limit_max;
  auto members = (*devices)->member_pointers();
  auto array = open_array(members, setup);
  if (!array) return launch.fail(array.error().message);
  for (const std::string& note : (*array)->notes()) fs_log().warn("{}", note);
  // Before the filesystem's first reads (its journal replay among them).
  (*array)->set_max_read_errors(config.max_read_errors);
  auto filesystem = fs::Filesystem::mount((*array)->volume(), fs_options);
  if (!filesystem) {
    return launch.fail(filesystem.error().message);
  }

  char resolved[PATH_MAX];
  const std::string absolute_mountpoint =
      realpath(mountpoint.c_str(), resolved) != nullptr ? resolved : mountpoint;
  Array& array_ref = **array;
  fs::Filesystem& fs_ref = **filesystem;
  auto array_control = std::make_unique<fs::ArrayControl>(array_ref, **devices, absolute_mountpoint,
                                                          config.event_program);
  fs::ArrayControl& array_control_ref = *array_control;
  // Scrubs check file data and metadata against their checksums while the filesystem is
  // there.
  std::unique_ptr<ScrubChecker> scrub_checker = fs_ref.scrub_checker();
  array_ref.set_scrub_checker(scrub_checker.get());
  // A scrub the last unmount (or a crash) cut short goes on from its checkpoint.
  array_ref.resume_scrub();
  const auto stop_checking = [&] {
    array_ref.set_scrub_checker(nullptr);
    scrub_checker.reset();
  };
  auto control = fs::ControlServer::start(
      fs::control_socket_path(fs_ref.superblock().uuid),
      [&](const nlohmann::json& request) -> nlohmann::json {
        const std::string command = request["command"];
        if (command == "status") {
          return fs::status_json(array_ref, fs_ref, absolute_mountpoint, &array_control_ref);
        }
        if (command == "stats") return fs::stats_json(array_ref, fs_ref, setup.engine);
        if (command == "iostat") return fs::iostat_json(array_ref, setup.engine);
        if (auto reply = array_control_ref.handle(request)) return *reply;
        return {
            {"error", "unknown command '" + command +
                          "' (status, stats, iostat, fail, remove, add, replace, re-add, rebuild, "
                          "speed, log-level)"}};
      });
  if (!control) {
    array_control.reset();
    stop_checking();
    (void)fs_ref.unmount();
    return launch.fail(control.error().message);
  }

  context.fs = filesystem->get();
  // A loop ended by a signal (SIGINT, SIGTERM, SIGHUP) returns it: a clean stop too.
  int loop_status = -1;
  if (fuse_set_signal_handlers(session.get()) != 0) {
    error = "cannot install signal handlers";
  } else {
    fuse_set_log_func(keep_fuse_complaint);
    const int mounted = fuse_session_mount(session.get(), mountpoint.c_str());
    fuse_set_log_func(nullptr);
    // The hook also routes each worker's requests and replies through its own descriptor
    // (fuse_route.hpp): the daemon's own loop needs it.
    bool hooked = false;
    if (mounted == 0) {
      fs::killpriv::set_wanted(config.killpriv_v2);  // asked for in INIT's reply, through the hook
      hooked = fs::install_tmpfile_op(session.get()) == 0;
      if (!hooked)
        fs_log().warn("O_TMPFILE and killpriv v2 unavailable: libfuse refused the device hook");
    }
    if (mounted == 0) {
      fs_log().info("mounted {} on {}", paths.front(), mountpoint);
      if (readahead != 0) set_readahead(absolute_mountpoint, readahead);
      launch.report("");
      if (!config.foreground) {
        // Detached from the terminal from now on; logs go to syslog.
        const int null = ::open("/dev/null", O_RDWR);
        if (null >= 0) {
          dup2(null, 0);
          dup2(null, 1);
          dup2(null, 2);
          if (null > 2) close(null);
        }
      }
      if (config.single) {
        loop_status = fuse_session_loop(session.get());
      } else if (hooked && fs::own_loop_possible(session.get())) {
        // Reads' member I/O stays on the worker that took them (fuse_loop.hpp).
        loop_status = fs::run_fuse_loop(session.get(), config.io_threads);
      } else {
        // A kernel that gives a thread no io_uring of its own (logged).
        fuse_loop_config* loop = fuse_loop_cfg_create();
        fuse_loop_cfg_set_max_threads(loop, config.io_threads);
        fuse_loop_cfg_set_idle_threads(loop, config.io_threads);
        // Each worker reads its own clone of /dev/fuse: 4 KiB random reads gained 4% (medians
        // of three A/B runs on one tmpfs). One receiving thread queueing all but reads to a
        // pool was tried and dropped: file creation lost a third to the extra hand-off.
        fuse_loop_cfg_set_clone_fd(loop, 1);
        loop_status = fuse_session_loop_mt(session.get(), loop);
        fuse_loop_cfg_destroy(loop);
      }
      // A scrub's batch holds a read epoch: the scrub stops first.
      stop_checking();
      // Reads reply from their completions: none may outlive the session.
      (*filesystem)->wait_reads();
      fuse_session_unmount(session.get());
    } else {
      error = with_fuse_complaint(fmt::format("cannot mount on {}", mountpoint));
    }
    fuse_remove_signal_handlers(session.get());
  }
  session.reset();
  control->reset();
  array_control.reset();  // no event handled, no spare used, from here on
  stop_checking();
  // Everything reaches the members, and the array is recorded clean.
  int status = loop_status >= 0 ? 0 : 1;
  if (auto r = (*filesystem)->unmount(); !r) {
    fs_log().error("unmount: {}", r.error().message);
    status = 1;
  }
  filesystem->reset();
  if (auto r = array->close(); !r) {
    fs_log().error("closing the array: {}", r.error().message);
    status = 1;
  }
  if (!error.empty()) return launch.fail(error);
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  fuse_args args = FUSE_ARGS_INIT(argc, argv);
  // fuse_opt allocates the arguments: freed on every way out (a leak checker in the
  // sanitizer build fails the process otherwise).
  struct Cleanup {
    fuse_args& args;
    ~Cleanup() { fuse_opt_free_args(&args); }
  } cleanup{args};
  fuse_set_log_func(keep_fuse_complaint);  // until the FUSE session has taken its options
  auto parsed = fs::parse_mount_options(args, take_fuse_complaint);
  if (!parsed) {
    std::fprintf(stderr, "stripefs: %s\n", parsed.error().message.c_str());
    return parsed.error().code == fs::kBadValue ? 1 : 2;
  }
  fs::MountOptions& config = *parsed;
  if (config.help) {
    std::fputs(fs::mount_usage(), stdout);
    return 0;
  }
  if (config.version) {
    std::printf("stripefs %s (libfuse %s)\n", STRIPEFS_VERSION, fuse_pkgversion());
    return 0;
  }
  spdlog::set_level(!config.log_level.empty() ? spdlog::level::from_str(config.log_level)
                    : config.debug            ? spdlog::level::debug
                                              : spdlog::level::info);
  Launch launch;
  if (!config.foreground) {
    // Daemonize before any thread starts; the parent waits for the mount's outcome.
    int pipe_fds[2];
    if (pipe(pipe_fds) != 0) return fail_line("pipe failed");
    const pid_t child = fork();
    if (child < 0) return fail_line("fork failed");
    if (child > 0) {
      close(pipe_fds[1]);
      char line[4096];
      const ssize_t n = ::read(pipe_fds[0], line, sizeof(line) - 1);
      if (n > 0 && std::strncmp(line, "ok\n", 3) == 0) return 0;
      if (n <= 0) {
        int child_status = 0;
        waitpid(child, &child_status, 0);
        return 1;  // the child printed its error already
      }
      return 1;
    }
    close(pipe_fds[0]);
    launch.fd = pipe_fds[1];
    setsid();
    fs_log();  // register the loggers, so the syslog sink reaches all three
    raid_log();
    journal_log();
    auto syslog =
        std::make_shared<spdlog::sinks::syslog_sink_mt>("stripefs", LOG_PID, LOG_DAEMON, false);
    // The log goes to syslog (the journal) only: a mount that succeeds is silent on the
    // terminal, as mount(8) and the scripts around it expect; one that fails prints its one
    // line (Launch::fail).
    for (const char* name : {"fs", "raid", "journal"}) {
      if (auto logger = spdlog::get(name)) {
        for (auto& sink : logger->sinks()) sink->set_level(spdlog::level::off);
        logger->sinks().push_back(syslog);
      }
    }
  }
  return run(config, args, launch);
}
