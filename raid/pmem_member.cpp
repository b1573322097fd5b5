#include "raid/pmem_member.hpp"

#include <fcntl.h>
#include <libpmem2.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <iterator>

namespace stripefs {

namespace {

constexpr uint32_t kMaxIo = 1u << 20;

// libpmem2 returns -errno, or one of its own codes (below PMEM2_E_UNKNOWN) that have no
// errno; those are mostly unusable sources or configurations.
int errno_from_pmem2(int ret) {
  if (ret < 0 && ret > PMEM2_E_UNKNOWN) return -ret;
  return ret == PMEM2_E_IO_FAIL ? EIO : EINVAL;
}

// One line naming the path and the libpmem2 call that failed.
std::unexpected<Error> pmem2_failure(const std::string& path, const char* step, int ret) {
  const int code = errno_from_pmem2(ret);
  std::string why = pmem2_errormsg();
  // Some failures leave no message; the commonest is a character device that is not DAX.
  if (why.empty() && ret == PMEM2_E_INVALID_FILE_TYPE) why = "not a regular file or DAX device";
  if (why.empty()) why = ret > PMEM2_E_UNKNOWN ? std::strerror(code) : fmt::format("error {}", ret);
  return fail(code, "member {}: {}: {}", path, step, why);
}

struct ConfigDeleter {
  void operator()(pmem2_config* config) const { pmem2_config_delete(&config); }
};

}  // namespace

struct PmemMember::Mapping {
  int fd = -1;
  pmem2_source* source = nullptr;
  pmem2_map* map = nullptr;

  Mapping() = default;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    if (map != nullptr) pmem2_map_delete(&map);
    if (source != nullptr) pmem2_source_delete(&source);
    if (fd >= 0) ::close(fd);
  }
};

Result<std::unique_ptr<PmemMember>> PmemMember::open(const std::string& path) {
  auto mapping = std::make_unique<Mapping>();
  mapping->fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (mapping->fd < 0) return fail(errno, "member {}: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(mapping->fd, &st) != 0) {
    return fail(errno, "member {}: fstat: {}", path, std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode) && !S_ISCHR(st.st_mode)) {
    return fail(EINVAL, "member {}: not a DAX device or regular file", path);
  }

  pmem2_config* raw_config = nullptr;
  if (int ret = pmem2_config_new(&raw_config); ret != 0) {
    return pmem2_failure(path, "pmem2_config_new", ret);
  }
  // The mapping does not need its configuration once created.
  std::unique_ptr<pmem2_config, ConfigDeleter> config(raw_config);
  // PAGE is the coarsest granularity, so every mapping satisfies it, including a file in the
  // page cache; the granularity actually obtained is read back below.
  if (int ret = pmem2_config_set_required_store_granularity(config.get(), PMEM2_GRANULARITY_PAGE);
      ret != 0) {
    return pmem2_failure(path, "pmem2_config_set_required_store_granularity", ret);
  }
  if (int ret = pmem2_source_from_fd(&mapping->source, mapping->fd); ret != 0) {
    return pmem2_failure(path, "pmem2_source_from_fd", ret);
  }
  if (int ret = pmem2_map_new(&mapping->map, config.get(), mapping->source); ret != 0) {
    return pmem2_failure(path, "pmem2_map_new", ret);
  }

  const pmem2_granularity granularity = pmem2_map_get_store_granularity(mapping->map);
  DeviceLimits limits;
  limits.logical_block = 512;
  limits.physical_block = 4096;
  limits.minimum_io = 4096;
  limits.optimal_io = 0;
  // Memory has no request size limit; the bound keeps merging layers from building
  // unbounded requests.
  limits.max_io = kMaxIo;
  limits.rotational = false;
  // CACHE_LINE (ADR) and BYTE (eADR) mean stores reach the media without the page cache:
  // real DAX. PAGE means an ordinary page-cache mapping that only msync makes durable.
  limits.dax = granularity != PMEM2_GRANULARITY_PAGE;
  // Writes skip flushing by design, so every granularity needs a flush for durability: PAGE
  // an msync, CACHE_LINE cache-line write-backs, BYTE a store fence after non-temporal
  // copies. Reporting false would let upper layers skip the flushes that make data durable.
  limits.volatile_cache = true;

  // A file whose length is not a sector multiple ends in a partial sector no request can
  // address; DAX devices are always whole sectors.
  const uint64_t size =
      pmem2_map_get_size(mapping->map) / limits.logical_block * limits.logical_block;
  return std::unique_ptr<PmemMember>(new PmemMember(path, size, limits, std::move(mapping)));
}

PmemMember::PmemMember(std::string name, uint64_t size, DeviceLimits limits,
                       std::unique_ptr<Mapping> mapping)
    : Member(std::move(name), size, limits),
      mapping_(std::move(mapping)),
      base_(static_cast<std::byte*>(pmem2_map_get_address(mapping_->map))),
      memcpy_(pmem2_get_memcpy_fn(mapping_->map)),
      persist_(pmem2_get_persist_fn(mapping_->map)),
      flush_(pmem2_get_flush_fn(mapping_->map)),
      drain_(pmem2_get_drain_fn(mapping_->map)) {}

PmemMember::~PmemMember() = default;

void PmemMember::submit(MemberRequest request) {
  const int64_t result = execute(request);
  request.done(result);
}

uint64_t PmemMember::dirty_bytes() const {
  std::lock_guard lock(mutex_);
  return dirty_bytes_;
}

int64_t PmemMember::execute(const MemberRequest& request) {
  if (request.op == MemberOp::flush) {
    persist_dirty();
    return 0;
  }
  const uint64_t length = request.length();
  if (request.offset > size() || length > size() - request.offset) return -EINVAL;
  std::byte* at = base_ + request.offset;
  for (const iovec& v : request.iov) {
    if (request.op == MemberOp::read) {
      std::memcpy(v.iov_base, at, v.iov_len);
    } else {
      memcpy_(at, v.iov_base, v.iov_len, PMEM2_F_MEM_NOFLUSH);
    }
    at += v.iov_len;
  }
  if (request.op == MemberOp::write && length != 0) {
    if (request.fua || persist_each_write_.load(std::memory_order_relaxed)) {
      persist_(base_ + request.offset, length);
      persist_calls_.fetch_add(1, std::memory_order_relaxed);
    } else {
      mark_dirty(request.offset, request.offset + length);
    }
  }
  return static_cast<int64_t>(length);
}

void PmemMember::mark_dirty(uint64_t begin, uint64_t end) {
  std::lock_guard lock(mutex_);
  auto it = dirty_.upper_bound(begin);
  if (it != dirty_.begin() && std::prev(it)->second >= begin) --it;
  while (it != dirty_.end() && it->first <= end) {
    begin = std::min(begin, it->first);
    end = std::max(end, it->second);
    dirty_bytes_ -= it->second - it->first;
    it = dirty_.erase(it);
  }
  dirty_.emplace(begin, end);
  dirty_bytes_ += end - begin;
}

void PmemMember::persist_dirty() {
  std::lock_guard flushing(flush_mutex_);
  // Writers go on meanwhile: ranges they dirty now are the next flush's. (Holding mutex_
  // through the persisting stalled every writer behind a flush of thousands of ranges, an
  // msync each at page granularity: stripefs-bench pmem, random writes 2-4% slower.)
  std::map<uint64_t, uint64_t> taken;
  {
    std::lock_guard lock(mutex_);
    taken.swap(dirty_);
    dirty_bytes_ = 0;
  }
  if (taken.empty()) return;
  for (const auto& [begin, end] : taken) flush_(base_ + begin, end - begin);
  drain_();
  persist_calls_.fetch_add(taken.size(), std::memory_order_relaxed);
}

}  // namespace stripefs
