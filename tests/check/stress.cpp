// stripefs-stress: a concurrent metadata stress in the spirit of fsstress. Several processes
// run random operations on one small shared tree under DIR (names d0..d3 for directories,
// f0..f5 for the rest, up to three levels deep), so they race each other on the same names:
// mkdir, rmdir, create and write, unlink, rename (files and directories, across
// directories, over existing names), hard link, symlink, truncate, setxattr/removexattr,
// chmod, utimes, fsync, readdir, stat and read.
//
//   stripefs-stress [-p procs] [-n ops] [-S seed] DIR
//
// An operation may fail the ways racing processes make it fail (ENOENT, EEXIST, ENOTEMPTY,
// ENOTDIR, EISDIR, EINVAL, EPERM, ELOOP, EMLINK, ENODATA), or with ENOSPC (renames nest
// directories into each other without bound, so a long run may fill a small array, and
// the filesystem must come back from it); any other error (EIO, ESTALE, a
// dead mount) is a failure: the operation, its path and the error are printed and the run
// exits 1. The tree's correctness afterwards is for the caller to check (walk it, remove it,
// fsck).
#include <dirent.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

bool expected_errno(int e) {
  switch (e) {
    case ENOENT:
    case EEXIST:
    case ENOTEMPTY:
    case ENOTDIR:
    case EISDIR:
    case EINVAL:
    case EPERM:
    case ELOOP:
    case EMLINK:
    case ENODATA:
    case ENOSPC:  // renames nest subtrees without bound: a long run may fill the array
      return true;
    default:
      return false;
  }
}

class Stress {
 public:
  Stress(std::string root, uint64_t seed) : root_(std::move(root)), rng_(seed) {}

  // One random operation; false when it failed in a way racing cannot explain.
  bool step() {
    const std::string a = path(), b = path(), d = dir_path(), x = any_path(), y = any_path();
    switch (pick(16)) {
      case 0:
        return check("mkdir", d, mkdir(d.c_str(), 0755));
      case 1:
        return check("rmdir", d, rmdir(d.c_str()));
      case 2:
      case 3:
        return create(a);
      case 4:
        return check("unlink", a, unlink(a.c_str()));
      case 5:
        return check("rename", x + " " + y, rename(x.c_str(), y.c_str()));
      case 6:
        return check("link", a + " " + b, link(a.c_str(), b.c_str()));
      case 7:
        return check("symlink", b, symlink(x.c_str(), b.c_str()));
      case 8:
        return check("truncate", a, truncate(a.c_str(), static_cast<off_t>(pick(256 << 10))));
      case 9: {
        const std::string value(pick(200), 'v');
        return check("setxattr", a,
                     setxattr(a.c_str(), "user.stress", value.data(), value.size(), 0));
      }
      case 10:
        return check("removexattr", a, removexattr(a.c_str(), "user.stress"));
      case 11:
        return check("chmod", a, chmod(a.c_str(), 0600 | static_cast<mode_t>(pick(0100))));
      case 12:
        return check("utimes", a, utimensat(AT_FDCWD, a.c_str(), nullptr, 0));
      case 13:
        return sync(a);
      case 14:
        return list(d);
      default:
        return read_all(a);
    }
  }

 private:
  size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  std::string dirs(size_t depth) {
    std::string p = root_;
    for (size_t i = 0; i < depth; ++i) p += "/d" + std::to_string(pick(4));
    return p;
  }
  std::string path() { return dirs(pick(3)) + "/f" + std::to_string(pick(6)); }
  std::string dir_path() { return dirs(pick(3) + 1); }
  std::string any_path() { return pick(3) == 0 ? dir_path() : path(); }

  bool check(const char* op, const std::string& what, int rc) {
    if (rc == 0 || expected_errno(errno)) return true;
    std::fprintf(stderr, "stripefs-stress: %s %s: %s\n", op, what.c_str(), std::strerror(errno));
    return false;
  }
  bool create(const std::string& p) {
    const int fd = open(p.c_str(), O_CREAT | O_WRONLY, 0644);
    if (fd < 0) return check("create", p, -1);
    std::vector<char> data(pick(64 << 10), static_cast<char>('a' + pick(26)));
    const off_t at = static_cast<off_t>(pick(128 << 10));
    const bool ok = check("write", p, pwrite(fd, data.data(), data.size(), at) < 0 ? -1 : 0);
    close(fd);
    return ok;
  }
  bool sync(const std::string& p) {
    const int fd = open(p.c_str(), O_RDONLY);
    if (fd < 0) return check("open", p, -1);
    const bool ok = check("fsync", p, fsync(fd));
    close(fd);
    return ok;
  }
  bool list(const std::string& p) {
    DIR* d = opendir(p.c_str());
    if (d == nullptr) return check("opendir", p, -1);
    errno = 0;
    while (readdir(d) != nullptr) {
    }
    const bool ok = check("readdir", p, errno != 0 ? -1 : 0);
    closedir(d);
    return ok;
  }
  bool read_all(const std::string& p) {
    struct stat st {};
    if (lstat(p.c_str(), &st) != 0) return check("stat", p, -1);
    if (!S_ISREG(st.st_mode)) return true;
    const int fd = open(p.c_str(), O_RDONLY);
    if (fd < 0) return check("open", p, -1);
    char buf[65536];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0) {
    }
    const bool ok = check("read", p, n < 0 ? -1 : 0);
    close(fd);
    return ok;
  }

  std::string root_;
  std::mt19937_64 rng_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"A concurrent metadata stress on a shared tree"};
  int procs = 4;
  uint64_t ops = 10000, seed = 0;
  std::string dir;
  app.add_option("-p,--procs", procs, "processes")->check(CLI::Range(1, 64));
  app.add_option("-n,--ops", ops, "operations per process");
  app.add_option("-S,--seed", seed, "random seed (0: one from the clock, printed)");
  app.add_option("dir", dir, "the tree's root (made if missing)")->required();
  CLI11_PARSE(app, argc, argv);
  if (seed == 0) seed = std::random_device{}() | 1;
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    std::fprintf(stderr, "stripefs-stress: mkdir %s: %s\n", dir.c_str(), std::strerror(errno));
    return 1;
  }
  std::fprintf(stderr, "stripefs-stress: seed %llu, %d processes, %llu operations each\n",
               static_cast<unsigned long long>(seed), procs, static_cast<unsigned long long>(ops));
  std::vector<pid_t> children;
  const pid_t parent = getpid();
  for (int k = 0; k < procs; ++k) {
    const pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
      // Ends with the parent: a killed run (a power-cut test's) leaves no worker behind.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);
      Stress s(dir, seed * 1000 + static_cast<uint64_t>(k));
      for (uint64_t i = 0; i < ops; ++i) {
        if (!s.step()) _exit(1);
      }
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
  if (failed > 0) std::fprintf(stderr, "stripefs-stress: %d process(es) failed\n", failed);
  return failed == 0 ? 0 : 1;
}
