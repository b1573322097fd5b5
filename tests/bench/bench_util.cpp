#include "bench/bench_util.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>

namespace stripefs::bench {

Result<std::unique_ptr<MemberFiles>> MemberFiles::create(const std::string& dir, unsigned count,
                                                         uint64_t size, IoEngine& engine, bool keep,
                                                         FileMember::InMemory in_memory) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return fail(ec.value(), "cannot create {}: {}", dir, ec.message());
  auto files = std::make_unique<MemberFiles>();
  files->keep_ = keep;
  for (unsigned i = 0; i < count; ++i) {
    std::string path = fmt::format("{}/member-{}", dir, i);
    int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) return fail(errno, "{}: {}", path, std::strerror(errno));
    // Allocate for real so the first pass does not measure tmpfs page allocation.
    int rc = posix_fallocate(fd, 0, static_cast<off_t>(size));
    ::close(fd);
    if (rc != 0) return fail(rc, "{}: cannot allocate {} bytes: {}", path, size, std::strerror(rc));
    files->paths_.push_back(path);
    auto member = FileMember::open(path, engine, in_memory);
    if (!member) return fail(member.error());
    files->members_.push_back(std::move(*member));
  }
  return files;
}

Result<void> run_queued(
    uint64_t count, unsigned depth,
    const std::function<void(uint64_t, std::function<void(Result<void>)>)>& op) {
  std::mutex mutex;
  std::condition_variable cv;
  uint64_t issued = 0, completed = 0;
  std::optional<Error> error;
  std::unique_lock lock(mutex);
  while (issued < count && !error) {
    if (issued - completed < depth) {
      const uint64_t i = issued++;
      lock.unlock();
      op(i, [&](Result<void> r) {
        std::lock_guard inner(mutex);
        if (!r && !error) error = r.error();
        ++completed;
        cv.notify_one();
      });
      lock.lock();
    } else {
      cv.wait(lock, [&] { return issued - completed < depth; });
    }
  }
  cv.wait(lock, [&] { return completed == issued; });
  if (error) return std::unexpected(*error);
  return {};
}

MemberFiles::~MemberFiles() {
  members_.clear();
  if (keep_) return;
  for (const auto& path : paths_) ::unlink(path.c_str());
}

std::vector<Member*> MemberFiles::members() const {
  std::vector<Member*> out;
  for (const auto& m : members_) out.push_back(m.get());
  return out;
}

std::vector<FileMember*> MemberFiles::files() const {
  std::vector<FileMember*> out;
  for (const auto& m : members_) out.push_back(m.get());
  return out;
}

}  // namespace stripefs::bench
