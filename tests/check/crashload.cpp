// stripefs-crashload: a workload for power-cut tests that records what it made durable, and
// the check of a filesystem against that record after the cut.
//
//   stripefs-crashload run [-S seed] [-p procs] [-n ops] DIR LOG
//   stripefs-crashload verify DIR LOG
//
// run makes DIR with a directory pK (and pK/d) per process, syncs them, then each process
// loops over random operations on 32 names (f0..f15 in pK and in pK/d): create, overwrite,
// extend, truncate, punch hole, zero range, rename (over an existing file too, across the two
// directories), unlink, each followed or not by fsync/fdatasync of the file and its
// directories. Every process appends its record to LOG.K, one line per fact, each written
// before (what may change) or after (what is now durable) the operation:
//   N name              the name is being created or unlinked (not durable)
//   R from to           from is being renamed to `to` (not durable; one of them stays)
//   E name / G name     the name exists / does not exist, durably (its directory fsync'd)
//   D name              the contents are changing (not durable)
//   S name size hash    the contents are durable: this size and FNV-1a hash (after fsync)
//   READY               the process directories are durable
// It runs until killed (a power cut), or for -n operations per process.
//
// verify replays every LOG.K and checks DIR as a user would after the crash: every name
// durably present exists, with its durable contents where they are; every name durably
// gone is absent; a name or file in flux may be either way, but reads to its end without an
// error; no other name exists. Prints each problem and exits 1 on any.
#include <dirent.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr int kNames = 16;  // per directory

uint64_t fnv1a(const uint8_t* data, size_t size, uint64_t h = 0xcbf29ce484222325ull) {
  for (size_t i = 0; i < size; ++i) h = (h ^ data[i]) * 0x100000001b3ull;
  return h;
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "stripefs-crashload: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(1);
}

void fsync_path(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) die("open " + path);
  if (fsync(fd) != 0) die("fsync " + path);
  close(fd);
}

std::string parent_of(const std::string& path) {
  return path.substr(0, path.rfind('/'));
}

struct File {
  bool exists = false;
  std::vector<uint8_t> data;
};

// One process's workload on its directory.
class Worker {
 public:
  Worker(std::string dir, int log, uint64_t seed) : dir_(std::move(dir)), log_(log), rng_(seed) {
    for (int i = 0; i < kNames; ++i) {
      names_.push_back("f" + std::to_string(i));
      names_.push_back("d/f" + std::to_string(i));
    }
  }

  void step() {
    const std::string& name = names_[pick(names_.size())];
    File& f = files_[name];
    if (!f.exists) return create(name, f);
    switch (pick(10)) {
      case 0:
      case 1:
      case 2:
        return write(name, f);
      case 3:
        return truncate(name, f);
      case 4:
        return punch(name, f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE);
      case 5:
        return punch(name, f, FALLOC_FL_ZERO_RANGE);
      case 6:
        return rename(name, f);
      case 7:
        return unlink(name, f);
      default:
        return sync(name, f);
    }
  }

 private:
  size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  void say(const std::string& line) {
    const std::string l = line + "\n";
    if (::write(log_, l.data(), l.size()) != static_cast<ssize_t>(l.size())) die("log");
  }
  void say_stable(const std::string& name, const File& f) {
    say("S " + name + " " + std::to_string(f.data.size()) + " " +
        std::to_string(fnv1a(f.data.data(), f.data.size())));
    stable_.insert(name);
  }
  void say_changing(const std::string& name) {
    say("D " + name);
    stable_.erase(name);
  }
  // Sizes mostly small, sometimes a few full stripes.
  size_t length() { return chance(0.1) ? pick(2 << 20) + 1 : pick(128 << 10) + 1; }
  void fill(uint8_t* p, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      if (i % 8 == 0) word_ = rng_();
      p[i] = static_cast<uint8_t>(word_ >> (8 * (i % 8)));
    }
  }
  int open_file(const std::string& name, int flags) {
    const int fd = ::open(path(name).c_str(), flags, 0644);
    if (fd < 0) die("open " + path(name));
    return fd;
  }
  // fsync or fdatasync (both make the contents durable), then the line that says so.
  void sync_data(int fd, const std::string& name, const File& f) {
    if ((chance(0.5) ? fsync(fd) : fdatasync(fd)) != 0) die("fsync " + path(name));
    say_stable(name, f);
  }

  void create(const std::string& name, File& f) {
    say("N " + name);
    say_changing(name);
    const int fd = open_file(name, O_CREAT | O_EXCL | O_WRONLY);
    f.exists = true;
    f.data.resize(chance(0.2) ? 0 : length());
    fill(f.data.data(), f.data.size());
    if (pwrite(fd, f.data.data(), f.data.size(), 0) != static_cast<ssize_t>(f.data.size())) {
      die("write " + path(name));
    }
    if (chance(0.7)) {
      if (fsync(fd) != 0) die("fsync " + path(name));
      fsync_path(parent_of(path(name)));
      say("E " + name);
      say_stable(name, f);
    }
    close(fd);
  }

  void write(const std::string& name, File& f) {
    say_changing(name);
    const size_t at = pick(f.data.size() + (64 << 10));
    const size_t n = chance(0.3) ? pick(4096) + 1 : length();
    std::vector<uint8_t> buf(n);
    fill(buf.data(), n);
    const int fd = open_file(name, O_WRONLY);
    if (pwrite(fd, buf.data(), n, static_cast<off_t>(at)) != static_cast<ssize_t>(n)) {
      die("write " + path(name));
    }
    if (f.data.size() < at + n) f.data.resize(at + n);
    std::memcpy(f.data.data() + at, buf.data(), n);
    if (chance(0.5)) sync_data(fd, name, f);
    close(fd);
  }

  void truncate(const std::string& name, File& f) {
    say_changing(name);
    const size_t size = pick(f.data.size() * 3 / 2 + 4096);
    if (::truncate(path(name).c_str(), static_cast<off_t>(size)) != 0) die("truncate");
    f.data.resize(size);
    if (chance(0.5)) {
      const int fd = open_file(name, O_RDONLY);
      sync_data(fd, name, f);
      close(fd);
    }
  }

  void punch(const std::string& name, File& f, int mode) {
    if (f.data.empty()) return;
    say_changing(name);
    const size_t at = pick(f.data.size());
    const size_t n = pick(f.data.size() - at) + 1;
    const int fd = open_file(name, O_WRONLY);
    if (fallocate(fd, mode, static_cast<off_t>(at), static_cast<off_t>(n)) != 0) {
      die("fallocate " + path(name));
    }
    std::memset(f.data.data() + at, 0, n);
    if (chance(0.5)) sync_data(fd, name, f);
    close(fd);
  }

  void rename(const std::string& from, File& f) {
    const std::string& to = names_[pick(names_.size())];
    if (to == from) return;
    // Whether `from`'s contents were durable: the line for it is the last one about it.
    const bool stable = stable_.contains(from);
    say("R " + from + " " + to);
    if (::rename(path(from).c_str(), path(to).c_str()) != 0) die("rename " + path(from));
    File moved = std::move(f);
    f = File{};
    files_[to] = std::move(moved);
    stable_.erase(from);
    if (chance(0.7)) {
      fsync_path(parent_of(path(from)));
      fsync_path(parent_of(path(to)));
      say("G " + from);
      say("E " + to);
      if (stable) {
        say_stable(to, files_[to]);
      } else {
        say_changing(to);
      }
    } else {
      say_changing(to);
    }
  }

  void unlink(const std::string& name, File& f) {
    say("N " + name);
    if (::unlink(path(name).c_str()) != 0) die("unlink " + path(name));
    f = File{};
    stable_.erase(name);
    if (chance(0.7)) {
      fsync_path(parent_of(path(name)));
      say("G " + name);
    }
  }

  // The file and its directory made durable: name and contents both.
  void sync(const std::string& name, File& f) {
    const int fd = open_file(name, O_RDONLY);
    if (fsync(fd) != 0) die("fsync " + path(name));
    close(fd);
    fsync_path(parent_of(path(name)));
    say("E " + name);
    say_stable(name, f);
  }

  std::string dir_;
  int log_;
  std::mt19937_64 rng_;
  uint64_t word_ = 0;
  std::vector<std::string> names_;
  std::map<std::string, File> files_;
  std::set<std::string> stable_;  // names whose contents' last line is S (for rename)
};

int run(const std::string& dir, const std::string& log, uint64_t seed, int procs, uint64_t ops) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) die("mkdir " + dir);
  std::vector<int> logs;
  for (int k = 0; k < procs; ++k) {
    const std::string p = dir + "/p" + std::to_string(k);
    if (mkdir(p.c_str(), 0755) != 0 || mkdir((p + "/d").c_str(), 0755) != 0) die("mkdir " + p);
    fsync_path(p + "/d");
    fsync_path(p);
    const std::string l = log + "." + std::to_string(k);
    const int fd = open(l.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
    if (fd < 0) die("open " + l);
    logs.push_back(fd);
  }
  fsync_path(dir);
  fsync_path(parent_of(dir));
  for (int fd : logs) (void)!::write(fd, "READY\n", 6);
  std::printf("stripefs-crashload: seed %llu, %d processes\n",
              static_cast<unsigned long long>(seed), procs);
  std::fflush(stdout);
  std::vector<pid_t> children;
  const pid_t parent = getpid();
  for (int k = 0; k < procs; ++k) {
    const pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
      // Ends with the parent: a killed run leaves no worker writing into the next mount.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);
      Worker w(dir + "/p" + std::to_string(k), logs[k], seed * 1000 + k);
      for (uint64_t i = 0; ops == 0 || i < ops; ++i) w.step();
      _exit(0);
    }
    children.push_back(pid);
  }
  int failed = 0;
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  return failed == 0 ? 0 : 1;
}

// What a log says a name must be after the cut.
struct Expect {
  enum class Name : uint8_t { flux, present, absent } name = Name::flux;
  bool stable = false;
  uint64_t size = 0, hash = 0;
};

// Reads `path` to its end: its size and hash, or an error.
bool read_whole(const std::string& path, uint64_t& size, uint64_t& hash, std::string& error) {
  const int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) return error = std::strerror(errno), false;
  std::vector<uint8_t> buf(1 << 20);
  size = 0;
  hash = 0xcbf29ce484222325ull;
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      error = std::strerror(errno);
      close(fd);
      return false;
    }
    if (n == 0) break;
    hash = fnv1a(buf.data(), static_cast<size_t>(n), hash);
    size += static_cast<uint64_t>(n);
  }
  close(fd);
  return true;
}

int verify(const std::string& dir, const std::string& log) {
  int problems = 0, checked = 0, flux = 0;
  auto problem = [&](const std::string& what) {
    std::printf("%s\n", what.c_str());
    ++problems;
  };
  for (int k = 0;; ++k) {
    std::ifstream in(log + "." + std::to_string(k));
    if (!in) break;
    const std::string pdir = dir + "/p" + std::to_string(k);
    std::map<std::string, Expect> expect;
    // Renames still in flux of a name that was durably there: rename is atomic, so one of
    // the two names must be there after the cut. Any later line about either name ends it.
    std::map<std::string, std::string> renamed;  // from -> to, and to -> from
    auto settle = [&renamed](const std::string& name) {
      auto it = renamed.find(name);
      if (it == renamed.end()) return;
      renamed.erase(it->second);
      renamed.erase(it);
    };
    bool ready = false;
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream words(line);
      std::string op, name;
      words >> op >> name;
      settle(name);
      Expect& e = expect[name];
      if (op == "READY") {
        ready = true;
      } else if (op == "R") {
        std::string to;
        words >> to;
        settle(to);
        Expect& t = expect[to];
        if (e.name == Expect::Name::present) {
          renamed[name] = to;
          renamed[to] = name;
        }
        e.name = t.name = Expect::Name::flux;
        e.stable = t.stable = false;
      } else if (op == "N") {
        e.name = Expect::Name::flux;
        e.stable = false;  // what it held may be another file's now (a rename over it)
      } else if (op == "E") {
        e.name = Expect::Name::present;
      } else if (op == "G") {
        e.name = Expect::Name::absent;
        e.stable = false;
      } else if (op == "D") {
        e.stable = false;
      } else if (op == "S") {
        e.stable = true;
        words >> e.size >> e.hash;
      }
    }
    expect.erase("");
    struct stat st {};
    if (stat(pdir.c_str(), &st) != 0 || stat((pdir + "/d").c_str(), &st) != 0) {
      if (ready) problem(pdir + ": made durable before the cut, missing after it");
      continue;
    }
    for (const auto& [from, to] : renamed) {
      if (from > to) continue;  // each pair once
      struct stat a {
      }, b{};
      if (lstat((pdir + "/" + from).c_str(), &a) != 0 &&
          lstat((pdir + "/" + to).c_str(), &b) != 0) {
        problem(pdir + "/" + from + " -> " + to + ": renamed (in flux), both names gone");
      }
    }
    for (const auto& [name, e] : expect) {
      const std::string path = pdir + "/" + name;
      const bool exists = lstat(path.c_str(), &st) == 0;
      if (e.name == Expect::Name::absent) {
        if (exists) problem(path + ": unlinked or renamed away durably, still there");
        continue;
      }
      if (!exists) {
        if (e.name == Expect::Name::present) problem(path + ": made durable, missing");
        continue;
      }
      if (!S_ISREG(st.st_mode)) {
        problem(path + ": not a regular file");
        continue;
      }
      uint64_t size = 0, hash = 0;
      std::string error;
      if (!read_whole(path, size, hash, error)) {
        problem(path + ": cannot be read to its end: " + error);
        continue;
      }
      if (e.name == Expect::Name::present && e.stable) {
        ++checked;
        if (size != e.size || hash != e.hash) {
          problem(path + ": durable contents changed: " + std::to_string(size) +
                  " bytes, expected " + std::to_string(e.size) +
                  (size == e.size ? " (same size, other bytes)" : ""));
        }
      } else {
        ++flux;
      }
    }
    for (const std::string& sub : {std::string(), std::string("d/")}) {
      DIR* d = opendir((pdir + "/" + sub).c_str());
      if (d == nullptr) continue;
      while (dirent* entry = readdir(d)) {
        const std::string n = entry->d_name;
        if (n == "." || n == ".." || (sub.empty() && n == "d")) continue;
        if (!expect.contains(sub + n)) problem(pdir + "/" + sub + n + ": never made");
      }
      closedir(d);
    }
  }
  std::fprintf(stderr,
               "stripefs-crashload: %d durable files intact, %d in flux readable, %d problems\n",
               checked, flux, problems);
  return problems == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"A workload for power-cut tests, and the check after the cut"};
  app.require_subcommand(1);
  uint64_t seed = 0, ops = 0;
  int procs = 3;
  std::string dir, log;
  CLI::App* run_cmd = app.add_subcommand("run", "run the workload until killed");
  run_cmd->add_option("-S,--seed", seed, "random seed (0: one from the clock, printed)");
  run_cmd->add_option("-p,--procs", procs, "processes, each in its own directory")
      ->check(CLI::Range(1, 64));
  run_cmd->add_option("-n,--ops", ops, "operations per process (0: until killed)");
  CLI::App* verify_cmd = app.add_subcommand("verify", "check DIR against the record in LOG.*");
  for (CLI::App* cmd : {run_cmd, verify_cmd}) {
    cmd->add_option("dir", dir, "the workload's directory")->required();
    cmd->add_option("log", log, "the record's prefix (LOG.0, LOG.1, ...)")->required();
  }
  CLI11_PARSE(app, argc, argv);
  if (run_cmd->parsed()) {
    if (seed == 0) seed = std::random_device{}() | 1;
    return run(dir, log, seed, procs, ops);
  }
  return verify(dir, log);
}
