#include "fs/daemon/mount_options.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "raid/cpus.hpp"
#include "raid/units.hpp"

namespace stripefs::fs {

namespace {

constexpr const char* kUsage =
    "usage: stripefs [-f] [-d] [-s] [-o OPTIONS] SOURCE MOUNTPOINT\n"
    "  SOURCE: member devices joined by ':' (or given as separate arguments), or UUID=<array "
    "uuid>\n"
    "options (-o, comma-separated; FUSE options such as allow_other, ro, default_permissions\n"
    "are passed on):\n"
    "  journal_device=PATH   the array's separate journal device (write-hole protection)\n"
    "  backend=auto|block|pmem  how devices are driven: pmem maps them with libpmem2 and\n"
    "                        persists only on flush/FUA; block uses io_uring with O_DIRECT;\n"
    "                        auto (default) takes pmem for DAX devices and DAX files, else block\n"
    "  write_hole=closed|open  log partial-stripe writes first (closed, the default\n"
    "                        on an array with a write-hole journal) or not (open: faster\n"
    "                        small writes, the write hole open until a clean unmount)\n"
    "  killpriv=v2|v1        who takes set-id bits and file capabilities away on a write,\n"
    "                        truncate or chown: the filesystem (v2, the default, when the\n"
    "                        kernel offers it) or the kernel (v1: it asks before every write)\n"
    "  writeback_delay=SEC   write back dirty data older than this (default 5)\n"
    "  commit_interval=SEC   commit metadata at least this often (default 5)\n"
    "  cache_size=SIZE       dirty file data held before writers wait (default 256M)\n"
    "  io_threads=N          FUSE worker threads (default: one per CPU, 2 to 16)\n"
    "  readahead=SIZE        the mount's kernel readahead (default 4M, as btrfs sets; 0 keeps\n"
    "                        the kernel's 128K)\n"
    "  fsname=NAME           the mount's source as mount(8) and df show it (default: the\n"
    "                        first member); subtype=NAME its type, fuse.NAME (stripefs)\n"
    "  writeback_cache       let the kernel cache writes too\n"
    "  direct_io             bypass the kernel page cache for file data\n"
    "  acl, noacl            POSIX ACLs enforced by the kernel and inherited from default\n"
    "                        ACLs (acl, the default, as ext4), or stored only (noacl)\n"
    "  force                 start a dirty degraded array, rebuild damaged bitmap/journal\n"
    "  speed_limit_min=SIZE  rebuild rate per second while the array has other I/O (default\n"
    "                        16M; also stripefsctl speed)\n"
    "  speed_limit_max=SIZE  rebuild rate per second while it has none (default 0: no limit)\n"
    "  event_program=PATH    run PATH EVENT MOUNTPOINT DEVICE ROLE DETAIL on each array event\n"
    "                        (member-failed, array-degraded, rebuild-finished, ...)\n"
    "  log_level=NAME        trace, debug, info (default), warn, error, critical or off\n"
    "  max_read_errors=N     read errors corrected on a member (rewritten from redundancy)\n"
    "                        before it is failed (default 20, as md; 0: fail at the first)\n"
    "  -f  stay in the foreground   -d  debug (implies -f)   -s  single-threaded\n";

// What fuse_opt fills in: C strings it allocates, ints it sets.
struct Raw {
  char* journal_device = nullptr;
  char* backend = nullptr;
  char* write_hole = nullptr;
  char* killpriv = nullptr;
  double writeback_delay = 5.0;
  double commit_interval = 5.0;
  char* cache_size = nullptr;
  char* readahead = nullptr;
  char* speed_limit_min = nullptr;
  char* speed_limit_max = nullptr;
  char* event_program = nullptr;
  char* log_level = nullptr;
  unsigned io_threads = 0;
  unsigned max_read_errors = 20;
  int io_threads_given = 0;
  int writeback_cache = 0;
  int direct_io = 0;
  int noacl = 0;
  int force = 0;
  int read_only = 0;
  int help = 0;
  int version = 0;
  int foreground = 0;
  int debug = 0;
  int single = 0;
  int fsname_given = 0;
  int subtype_given = 0;
  std::vector<std::string> positional;
  ~Raw() {
    for (char* p : {journal_device, backend, write_hole, killpriv, cache_size, readahead,
                    speed_limit_min, speed_limit_max, event_program, log_level}) {
      std::free(p);
    }
  }
};

enum Key {
  kKeyHelp,
  kKeyVersion,
  kKeyForeground,
  kKeyDebug,
  kKeySingle,
  kKeyReadOnly,
  kKeyFsname,
  kKeySubtype
};

#define STRIPEFS_OPT(t, p, v) \
  { t, offsetof(Raw, p), v }
// "defaults" is fstab's placeholder, which mount.fuse3 passes on as it is.
const fuse_opt kOptions[] = {STRIPEFS_OPT("journal_device=%s", journal_device, 0),
                             STRIPEFS_OPT("backend=%s", backend, 0),
                             STRIPEFS_OPT("write_hole=%s", write_hole, 0),
                             STRIPEFS_OPT("killpriv=%s", killpriv, 0),
                             STRIPEFS_OPT("writeback_delay=%lf", writeback_delay, 0),
                             STRIPEFS_OPT("commit_interval=%lf", commit_interval, 0),
                             STRIPEFS_OPT("cache_size=%s", cache_size, 0),
                             STRIPEFS_OPT("readahead=%s", readahead, 0),
                             STRIPEFS_OPT("speed_limit_min=%s", speed_limit_min, 0),
                             STRIPEFS_OPT("speed_limit_max=%s", speed_limit_max, 0),
                             STRIPEFS_OPT("event_program=%s", event_program, 0),
                             STRIPEFS_OPT("log_level=%s", log_level, 0),
                             STRIPEFS_OPT("io_threads=%u", io_threads, 0),
                             STRIPEFS_OPT("max_read_errors=%u", max_read_errors, 0),
                             STRIPEFS_OPT("io_threads=", io_threads_given, 1),
                             STRIPEFS_OPT("writeback_cache", writeback_cache, 1),
                             STRIPEFS_OPT("direct_io", direct_io, 1),
                             STRIPEFS_OPT("acl", noacl, 0),
                             STRIPEFS_OPT("noacl", noacl, 1),
                             STRIPEFS_OPT("force", force, 1),
                             FUSE_OPT_KEY("-h", kKeyHelp),
                             FUSE_OPT_KEY("--help", kKeyHelp),
                             FUSE_OPT_KEY("-V", kKeyVersion),
                             FUSE_OPT_KEY("--version", kKeyVersion),
                             FUSE_OPT_KEY("-f", kKeyForeground),
                             FUSE_OPT_KEY("-d", kKeyDebug),
                             FUSE_OPT_KEY("debug", kKeyDebug),
                             FUSE_OPT_KEY("-s", kKeySingle),
                             FUSE_OPT_KEY("ro", kKeyReadOnly),
                             FUSE_OPT_KEY("fsname=", kKeyFsname),
                             FUSE_OPT_KEY("subtype=", kKeySubtype),
                             FUSE_OPT_KEY("defaults", FUSE_OPT_KEY_DISCARD),
                             FUSE_OPT_END};
#undef STRIPEFS_OPT

int option_proc(void* data, const char* arg, int key, fuse_args*) {
  auto* c = static_cast<Raw*>(data);
  switch (key) {
    case FUSE_OPT_KEY_NONOPT:
      c->positional.emplace_back(arg);
      return 0;
    case kKeyHelp:
      c->help = 1;
      return 0;
    case kKeyVersion:
      c->version = 1;
      return 0;
    case kKeyForeground:
      c->foreground = 1;
      return 0;
    case kKeyDebug:
      c->debug = c->foreground = 1;
      return 1;  // FUSE's debug output too
    case kKeySingle:
      c->single = 1;
      return 0;
    case kKeyReadOnly:
      c->read_only = 1;
      return 1;  // the kernel must know too
    case kKeyFsname:
      c->fsname_given = 1;
      return 1;  // FUSE's own option: the user's name for the mount wins over ours
    case kKeySubtype:
      c->subtype_given = 1;
      return 1;
    default:
      return 1;
  }
}

// The values, checked: the first that is out of range, by name.
Result<void> check_values(const Raw& raw, MountOptions& out) {
  // NaN compares false both ways: only a finite number above 0 passes.
  const auto seconds = [](double s) { return std::isfinite(s) && s > 0; };
  if (!seconds(raw.writeback_delay)) {
    return fail(kBadValue, "writeback_delay={}: not a positive number of seconds",
                raw.writeback_delay);
  }
  if (!seconds(raw.commit_interval)) {
    return fail(kBadValue, "commit_interval={}: not a positive number of seconds",
                raw.commit_interval);
  }
  if (raw.backend != nullptr) {
    auto backend = parse_member_backend(raw.backend);
    if (!backend) return fail(kBadValue, "backend={}: not auto, block or pmem", raw.backend);
    out.backend = *backend;
  }
  out.fs.writeback_delay_s = raw.writeback_delay;
  out.fs.commit_interval_s = raw.commit_interval;
  if (raw.io_threads_given && (raw.io_threads == 0 || raw.io_threads > 256)) {
    return fail(kBadValue, "io_threads must be between 1 and 256");
  }
  out.io_threads = raw.io_threads_given ? raw.io_threads : 0;
  if (raw.cache_size != nullptr) {
    auto size = parse_size(raw.cache_size);
    if (!size || *size < (16u << 20)) {
      return fail(kBadValue, "cache_size={}: not a size of at least 16M", raw.cache_size);
    }
    out.fs.cache_bytes = *size;
  }
  if (raw.readahead != nullptr) {
    auto size = parse_size(raw.readahead);
    if (!size || *size > (1ull << 30)) {
      return fail(kBadValue, "readahead={}: not a size up to 1G", raw.readahead);
    }
    out.readahead = *size;
  }
  // A rate: a size per second, or 0 (no limit: the maximum only).
  const auto rate = [](const char* text) -> std::optional<uint64_t> {
    if (std::string_view(text) == "0") return 0;
    auto size = parse_size(text);
    return size ? std::optional<uint64_t>(*size) : std::nullopt;
  };
  if (raw.speed_limit_min != nullptr) {
    auto r = rate(raw.speed_limit_min);
    if (!r || *r == 0) {
      return fail(kBadValue, "speed_limit_min={}: not a size per second such as 16M",
                  raw.speed_limit_min);
    }
    out.speed_limit_min = *r;
  }
  if (raw.speed_limit_max != nullptr) {
    auto r = rate(raw.speed_limit_max);
    if (!r) {
      return fail(kBadValue, "speed_limit_max={}: not a size per second (0: no limit)",
                  raw.speed_limit_max);
    }
    out.speed_limit_max = *r;
  }
  if (out.speed_limit_max != 0 && out.speed_limit_min > out.speed_limit_max) {
    return fail(kBadValue, "speed_limit_min is above speed_limit_max");
  }
  if (raw.max_read_errors > 1000000) {
    return fail(kBadValue, "max_read_errors={}: at most 1000000 (0 fails a member at its first)",
                raw.max_read_errors);
  }
  out.max_read_errors = raw.max_read_errors;
  if (raw.event_program != nullptr) {
    out.event_program = raw.event_program;
    if (out.event_program.empty() || out.event_program[0] != '/' ||
        access(out.event_program.c_str(), X_OK) != 0) {
      return fail(kBadValue, "event_program={}: not an absolute path to an executable",
                  out.event_program);
    }
  }
  if (raw.log_level != nullptr) {
    const std::string level = raw.log_level;
    static const char* const kLevels[] = {"trace", "debug",    "info", "warn",
                                          "error", "critical", "off"};
    if (std::find(std::begin(kLevels), std::end(kLevels), level) == std::end(kLevels)) {
      return fail(kBadValue, "log_level={}: one of trace, debug, info, warn, error, critical, off",
                  level);
    }
    out.log_level = level;
  }
  if (raw.write_hole != nullptr) {
    const std::string value = raw.write_hole;
    if (value == "open") {
      out.log_partial_stripes = false;
    } else if (value != "closed") {
      return fail(kBadValue, "write_hole={}: not closed or open", value);
    }
  }
  if (raw.killpriv != nullptr) {
    const std::string value = raw.killpriv;
    if (value == "v1") {
      out.killpriv_v2 = false;
    } else if (value != "v2") {
      return fail(kBadValue, "killpriv={}: not v2 or v1", value);
    }
  }
  return {};
}

}  // namespace

Result<MountOptions> parse_mount_options(fuse_args& args, std::string (*fuse_complaint)()) {
  Raw raw;
  if (fuse_opt_parse(&args, &raw, kOptions, option_proc) != 0) {
    const std::string said = fuse_complaint != nullptr ? fuse_complaint() : "";
    return fail(kBadSyntax, "{} (see stripefs --help)",
                said.empty() ? std::string("bad options") : "bad options: " + said);
  }
  MountOptions out;
  out.help = raw.help != 0;
  out.version = raw.version != 0;
  if (out.help || out.version) return out;
  if (raw.positional.size() < 2) {
    return fail(kMissingArgs, "need a SOURCE and a MOUNTPOINT (see stripefs --help)");
  }
  out.mountpoint = raw.positional.back();
  out.sources.assign(raw.positional.begin(), raw.positional.end() - 1);
  out.journal_device = raw.journal_device != nullptr ? raw.journal_device : "";
  out.fs.read_only = raw.read_only != 0;
  out.writeback_cache = raw.writeback_cache != 0;
  out.direct_io = raw.direct_io != 0;
  out.posix_acl = raw.noacl == 0;
  out.force = raw.force != 0;
  out.foreground = raw.foreground != 0;
  out.debug = raw.debug != 0;
  out.single = raw.single != 0;
  out.fsname_given = raw.fsname_given != 0;
  out.subtype_given = raw.subtype_given != 0;
  if (auto ok = check_values(raw, out); !ok) return fail(ok.error());
  return out;
}

const char* mount_usage() {
  return kUsage;
}

unsigned io_threads_for(unsigned cpus) {
  return std::clamp(cpus, 2u, 16u);
}

unsigned default_io_threads() {
  return io_threads_for(usable_cpus());
}

}  // namespace stripefs::fs
