// stripefs-fsx: a data-integrity exerciser in the spirit of fsx. Random operations on one
// file — write, read, truncate, fallocate (allocate, keep size), punch hole, zero range,
// copy_file_range, mmap read and write, fsync — each mirrored in a shadow copy in memory;
// every read and the range each operation touched are checked against the shadow, and the
// whole file every --check-every operations and at the end. The seed is printed, and a run
// is reproduced by giving it again. On a mismatch: the first bad offset, both bytes, and
// the last operations, then exit 1.
//
//   stripefs-fsx [-N ops] [-S seed] [-l max_len] [-o max_op] [--check-every N]
//                [--save FILE] [--verify FILE] FILE
// --save writes the shadow to FILE at the end (after an fsync); --verify only compares
// FILE's contents with a shadow saved earlier (a remount in between).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace {

struct Options {
  uint64_t ops = 10000;
  uint64_t seed = 0;
  uint64_t max_len = 4 << 20;   // the file's largest size
  uint64_t max_op = 256 << 10;  // the largest single operation
  uint64_t check_every = 1000;
  std::string save, verify, path;
};

class Exerciser {
 public:
  Exerciser(const Options& o, int fd) : o_(o), fd_(fd), random_(o.seed) {}

  int run() {
    for (uint64_t n = 1; n <= o_.ops; ++n) {
      if (!step(n)) return 1;
      if (o_.check_every != 0 && n % o_.check_every == 0 && !check_all(n)) return 1;
    }
    return check_all(o_.ops) ? 0 : 1;
  }
  const std::vector<char>& shadow() const { return shadow_; }

 private:
  uint64_t pick(uint64_t below) { return below == 0 ? 0 : random_() % below; }
  uint64_t block_down(uint64_t v) const { return v / 4096 * 4096; }

  void note(uint64_t n, const std::string& what) {
    log_.push_back(std::to_string(n) + " " + what);
    if (log_.size() > 40) log_.pop_front();
  }
  bool fail(uint64_t n, const std::string& what) {
    std::fprintf(stderr, "fsx: operation %llu: %s\nfsx: seed %llu; the last operations:\n",
                 static_cast<unsigned long long>(n), what.c_str(),
                 static_cast<unsigned long long>(o_.seed));
    for (const std::string& line : log_) std::fprintf(stderr, "  %s\n", line.c_str());
    return false;
  }
  bool sys(uint64_t n, bool ok, const char* call) {
    return ok ? true : fail(n, std::string(call) + ": " + std::strerror(errno));
  }
  // The file's bytes [off, off+len) against the shadow's.
  bool check(uint64_t n, uint64_t off, uint64_t len) {
    std::vector<char> got(len);
    uint64_t done = 0;
    while (done < len) {
      const ssize_t r = pread(fd_, got.data() + done, len - done, static_cast<off_t>(off + done));
      if (r < 0) return sys(n, false, "pread");
      if (r == 0) break;
      done += static_cast<uint64_t>(r);
    }
    const uint64_t expect = off >= shadow_.size() ? 0 : std::min(len, shadow_.size() - off);
    if (done != expect) {
      return fail(n, "read " + std::to_string(done) + " bytes at " + std::to_string(off) +
                         ", expected " + std::to_string(expect) + " (file size " +
                         std::to_string(shadow_.size()) + ")");
    }
    for (uint64_t i = 0; i < done; ++i) {
      if (got[i] != shadow_[off + i]) {
        char line[160];
        std::snprintf(line, sizeof line, "byte %llu is 0x%02x, expected 0x%02x",
                      static_cast<unsigned long long>(off + i), got[i] & 0xff,
                      shadow_[off + i] & 0xff);
        return fail(n, line);
      }
    }
    return true;
  }
  bool check_all(uint64_t n) {
    struct stat st;
    if (fstat(fd_, &st) != 0) return sys(n, false, "fstat");
    if (static_cast<uint64_t>(st.st_size) != shadow_.size()) {
      return fail(
          n, "size " + std::to_string(st.st_size) + ", expected " + std::to_string(shadow_.size()));
    }
    return check(n, 0, shadow_.size());
  }

  bool step(uint64_t n) {
    const uint64_t size = shadow_.size();
    uint64_t off = pick(o_.max_len);
    uint64_t len = 1 + pick(std::min(o_.max_op, o_.max_len - off));
    char what[160];
    switch (pick(11)) {
      case 0:
      case 1:
      case 2: {  // write
        std::vector<char> data(len);
        for (auto& c : data) c = static_cast<char>(random_() & 0xff);
        std::snprintf(what, sizeof what, "write %llu+%llu", (unsigned long long)off,
                      (unsigned long long)len);
        note(n, what);
        if (pwrite(fd_, data.data(), len, static_cast<off_t>(off)) != static_cast<ssize_t>(len))
          return sys(n, false, "pwrite");
        if (off + len > shadow_.size()) shadow_.resize(off + len, 0);
        std::memcpy(shadow_.data() + off, data.data(), len);
        return check(n, off, len);
      }
      case 3: {  // read
        if (size == 0) return true;
        off = pick(size);
        len = 1 + pick(std::min(o_.max_op, size - off));
        std::snprintf(what, sizeof what, "read %llu+%llu", (unsigned long long)off,
                      (unsigned long long)len);
        note(n, what);
        return check(n, off, len);
      }
      case 4: {  // truncate, down more often than up
        const uint64_t to = pick(4) == 0 ? pick(o_.max_len) : pick(size + 1);
        std::snprintf(what, sizeof what, "truncate %llu -> %llu", (unsigned long long)size,
                      (unsigned long long)to);
        note(n, what);
        if (ftruncate(fd_, static_cast<off_t>(to)) != 0) return sys(n, false, "ftruncate");
        shadow_.resize(to, 0);
        return check(n, to > 8192 ? to - 8192 : 0, 16384);
      }
      case 5: {  // fallocate, growing the size or not
        const bool keep = pick(2) == 0;
        std::snprintf(what, sizeof what, "fallocate%s %llu+%llu", keep ? " keep-size" : "",
                      (unsigned long long)off, (unsigned long long)len);
        note(n, what);
        if (fallocate(fd_, keep ? FALLOC_FL_KEEP_SIZE : 0, static_cast<off_t>(off),
                      static_cast<off_t>(len)) != 0)
          return sys(n, false, "fallocate");
        if (!keep && off + len > shadow_.size()) shadow_.resize(off + len, 0);
        return check(n, off, len);
      }
      case 6:
      case 7: {  // punch hole or zero range: reads as zeros, size kept
        if (size == 0) return true;
        off = pick(size);
        len = 1 + pick(std::min(o_.max_op, size - off));
        const bool punch = pick(2) == 0;
        std::snprintf(what, sizeof what, "%s %llu+%llu", punch ? "punch" : "zero",
                      (unsigned long long)off, (unsigned long long)len);
        note(n, what);
        const int mode = punch ? FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
                               : FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE;
        if (fallocate(fd_, mode, static_cast<off_t>(off), static_cast<off_t>(len)) != 0)
          return sys(n, false, punch ? "fallocate(punch)" : "fallocate(zero)");
        std::fill(shadow_.begin() + static_cast<std::ptrdiff_t>(off),
                  shadow_.begin() + static_cast<std::ptrdiff_t>(std::min(off + len, size)), 0);
        return check(n, off, len);
      }
      case 8: {  // copy_file_range within the file, ranges apart
        if (size < 2) return true;
        const uint64_t from = pick(size);
        len = 1 + pick(std::min({o_.max_op, size - from, o_.max_len / 2}));
        uint64_t to = pick(o_.max_len - len);
        if (to < from + len && from < to + len) return true;  // overlapping: not allowed
        std::snprintf(what, sizeof what, "copy_file_range %llu+%llu -> %llu",
                      (unsigned long long)from, (unsigned long long)len, (unsigned long long)to);
        note(n, what);
        uint64_t done = 0;
        while (done < len) {
          loff_t in = static_cast<loff_t>(from + done), out = static_cast<loff_t>(to + done);
          const ssize_t r = copy_file_range(fd_, &in, fd_, &out, len - done, 0);
          if (r < 0) return sys(n, false, "copy_file_range");
          if (r == 0) break;
          done += static_cast<uint64_t>(r);
        }
        if (to + done > shadow_.size()) shadow_.resize(to + done, 0);
        std::memmove(shadow_.data() + to, shadow_.data() + from, done);
        return check(n, to, len);
      }
      case 9: {  // mmap read or write inside the file
        if (size == 0) return true;
        off = pick(size);
        len = 1 + pick(std::min(o_.max_op, size - off));
        const uint64_t base = block_down(off);
        const bool write = pick(2) == 0;
        std::snprintf(what, sizeof what, "mmap %s %llu+%llu", write ? "write" : "read",
                      (unsigned long long)off, (unsigned long long)len);
        note(n, what);
        void* map = mmap(nullptr, off + len - base, PROT_READ | PROT_WRITE, MAP_SHARED, fd_,
                         static_cast<off_t>(base));
        if (map == MAP_FAILED) return sys(n, false, "mmap");
        char* at = static_cast<char*>(map) + (off - base);
        bool ok = true;
        if (write) {
          for (uint64_t i = 0; i < len; ++i) {
            at[i] = static_cast<char>(random_() & 0xff);
            shadow_[off + i] = at[i];
          }
          ok = msync(map, off + len - base, MS_SYNC) == 0 || sys(n, false, "msync");
        } else if (std::memcmp(at, shadow_.data() + off, len) != 0) {
          ok = fail(n, "the mapping differs from the shadow");
        }
        munmap(map, off + len - base);
        return ok && check(n, off, len);
      }
      default: {  // fsync
        note(n, "fsync");
        return sys(n, fsync(fd_) == 0, "fsync");
      }
    }
  }

  const Options& o_;
  int fd_;
  std::mt19937_64 random_;
  std::vector<char> shadow_;
  std::deque<std::string> log_;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"random operations on one file, checked against a shadow copy (fsx)"};
  app.add_option("-N,--ops", o.ops, "operations (default 10000)");
  app.add_option("-S,--seed", o.seed, "random seed (default: from the clock, printed)");
  app.add_option("-l,--max-len", o.max_len, "the file's largest size in bytes (default 4 MiB)")
      ->check(CLI::Range(uint64_t{4096}, uint64_t{1} << 40));
  app.add_option("-o,--max-op", o.max_op, "the largest operation in bytes (default 256 KiB)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30));
  app.add_option("--check-every", o.check_every, "compare the whole file every N operations");
  app.add_option("--save", o.save, "write the shadow copy here at the end");
  app.add_option("--verify", o.verify, "only compare the file with a shadow saved before");
  app.add_option("file", o.path, "the file to exercise (created)")->required();
  CLI11_PARSE(app, argc, argv);
  if (!o.verify.empty()) {
    std::ifstream saved(o.verify, std::ios::binary);
    std::ifstream file(o.path, std::ios::binary);
    if (!saved || !file) {
      std::fprintf(stderr, "fsx: cannot read %s or %s\n", o.verify.c_str(), o.path.c_str());
      return 2;
    }
    std::vector<char> a((std::istreambuf_iterator<char>(saved)), {});
    std::vector<char> b((std::istreambuf_iterator<char>(file)), {});
    if (a != b) {
      std::fprintf(stderr, "fsx: %s differs from the shadow saved in %s (%zu vs %zu bytes)\n",
                   o.path.c_str(), o.verify.c_str(), b.size(), a.size());
      return 1;
    }
    std::printf("fsx: %s matches the saved shadow\n", o.path.c_str());
    return 0;
  }
  if (o.seed == 0) o.seed = static_cast<uint64_t>(time(nullptr)) ^ static_cast<uint64_t>(getpid());
  o.max_op = std::min(o.max_op, o.max_len);
  std::fprintf(stderr, "fsx: seed %llu, %llu operations on %s\n",
               static_cast<unsigned long long>(o.seed), static_cast<unsigned long long>(o.ops),
               o.path.c_str());
  const int fd = open(o.path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    std::fprintf(stderr, "fsx: %s: %s\n", o.path.c_str(), std::strerror(errno));
    return 2;
  }
  Exerciser x(o, fd);
  const int rc = x.run();
  if (rc == 0 && !o.save.empty()) {
    if (fsync(fd) != 0) {
      std::fprintf(stderr, "fsx: fsync: %s\n", std::strerror(errno));
      return 1;
    }
    std::ofstream out(o.save, std::ios::binary);
    out.write(x.shadow().data(), static_cast<std::streamsize>(x.shadow().size()));
  }
  close(fd);
  if (rc == 0) std::printf("fsx: %llu operations, all checked\n", (unsigned long long)o.ops);
  return rc;
}
