// What every stripefs-bench subcommand shares: member files, timing, RESULT lines.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "raid/file_member.hpp"
#include "raid/io_engine.hpp"
#include "raid/result.hpp"

namespace stripefs::bench {

// Prints one machine-readable figure: "RESULT name value unit".
inline void result(const std::string& name, double value, const std::string& unit = "") {
  if (unit.empty()) {
    std::printf("RESULT %s %.3f\n", name.c_str(), value);
  } else {
    std::printf("RESULT %s %.3f %s\n", name.c_str(), value, unit.c_str());
  }
  std::fflush(stdout);
}

inline double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// Seconds taken by `work`.
inline double time_it(const std::function<void()>& work) {
  const auto start = std::chrono::steady_clock::now();
  work();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Runs `count` asynchronous operations, op(i, done), with at most `depth` in flight.
// Returns the first error.
Result<void> run_queued(uint64_t count, unsigned depth,
                        const std::function<void(uint64_t, std::function<void(Result<void>)>)>& op);

// Member files dir/member-N of `size` bytes, opened on `engine`; removed on destruction.
class MemberFiles {
 public:
  // With `keep`, the files stay when this object goes (the demo leaves its array behind).
  // The benchmarks measure the ring path, also on tmpfs (`in_memory` ring); `automatic`
  // drives files on tmpfs inline, as the programs do (file_member.hpp).
  static Result<std::unique_ptr<MemberFiles>> create(
      const std::string& dir, unsigned count, uint64_t size, IoEngine& engine, bool keep = false,
      FileMember::InMemory in_memory = FileMember::InMemory::ring);
  ~MemberFiles();
  std::vector<Member*> members() const;
  std::vector<FileMember*> files() const;

 private:
  std::vector<std::string> paths_;
  bool keep_ = false;
  std::vector<std::unique_ptr<FileMember>> members_;
};

}  // namespace stripefs::bench
