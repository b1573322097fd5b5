// Checksum recovery: bytes that read without error but are wrong (silent corruption: a bad
// cable, a disk returning stale or misdirected data). The caller knows what they should hold
// (a checksum); the Volume knows where else they live. Unlike a read error, nothing says
// which member is wrong, so every way of getting the bytes is tried against the check, and a
// chunk counts as wrong only when what it holds differs from what the passing contents say it
// should hold.
#include <algorithm>
#include <cstring>

#include "raid/aligned_buffer.hpp"
#include "raid/log.hpp"
#include "raid/volume.hpp"

namespace stripefs {

namespace {

// The stripe's lock, held for the scope.
class StripeGuard {
 public:
  StripeGuard(StripeLocks& locks, uint64_t stripe) : locks_(locks), stripe_(stripe) {
    locks_.lock(stripe_);
  }
  ~StripeGuard() { locks_.release(stripe_); }
  StripeGuard(const StripeGuard&) = delete;
  StripeGuard& operator=(const StripeGuard&) = delete;

 private:
  StripeLocks& locks_;
  uint64_t stripe_;
};

// Every way of choosing `extra` more slots out of `n` (from `start` on) to leave out, beside
// those `fixed` already out: calls f(missing) with the full list until f returns true.
template <class F>
bool for_each_choice(unsigned n, const std::vector<unsigned>& fixed, unsigned extra, F&& f,
                     unsigned start = 0) {
  if (extra == 0) return f(fixed);
  for (unsigned x = start; x < n; ++x) {
    if (std::find(fixed.begin(), fixed.end(), x) != fixed.end()) continue;
    std::vector<unsigned> more = fixed;
    more.push_back(x);
    if (for_each_choice(n, more, extra - 1, f, x + 1)) return true;
  }
  return false;
}

}  // namespace

Result<Volume::Recovered> Volume::recover_block(uint64_t offset, std::span<std::byte> data,
                                                const BlockCheck& good, bool rewrite) {
  const uint64_t chunk = geometry_.chunk_size();
  const uint64_t length = data.size();
  if (length == 0 || offset % sector_ != 0 || length % sector_ != 0 || offset + length > size() ||
      offset / chunk != (offset + length - 1) / chunk) {
    return fail(EINVAL, "recovering {} bytes at volume byte {}: not whole sectors within one chunk",
                length, offset);
  }
  const uint64_t stripe = offset / geometry_.stripe_data_size();
  const auto index = static_cast<unsigned>((offset % geometry_.stripe_data_size()) / chunk);
  const uint64_t within = offset % chunk;
  const bool parity = geometry_.has_parity();
  std::vector<ChunkLocation> where = level_->redundancy_set(stripe);
  if (where.empty()) where.push_back(geometry_.locate(stripe, index));  // RAID0: the one copy
  // The slots that hold the bytes as they are: the data chunk, or every copy of a mirror.
  std::vector<unsigned> holders;
  if (parity) {
    holders.push_back(index);
  } else {
    for (unsigned i = 0; i < where.size(); ++i) holders.push_back(i);
  }
  const auto n = static_cast<unsigned>(where.size());

  StripeGuard guard(locks_, stripe);
  AlignedBuffer rows(uint64_t{n} * length), work(uint64_t{n} * length);
  const auto row = [&](AlignedBuffer& b, unsigned i) {
    return b.span().subspan(i * length, length);
  };
  std::vector<bool> readable(n, false);
  for (unsigned i = 0; i < n; ++i) {
    // In sync for this stripe: in service, or being rebuilt and past it (its chunk is
    // written with the stripe, so it is read, checked and rewritten like the others).
    if (!members_.in_sync(where[i].member, stripe)) continue;
    VolumeCounters::add(stats_.member_read_ios, 1);
    readable[i] = member_read(*members_[where[i].member],
                              data_offset_ + where[i].member_offset + within, row(rows, i))
                      .has_value();
  }

  // The contents that pass, and for each slot what it should hold (`should`, null: as read).
  std::span<const std::byte> found;
  std::vector<const std::byte*> should(n, nullptr);
  for (unsigned h : holders) {
    if (readable[h] && good(row(rows, h))) {
      found = row(rows, h);
      for (unsigned c : holders) should[c] = found.data();
      break;
    }
  }
  std::vector<unsigned> lost;  // slots with nothing read: always rebuilt
  for (unsigned i = 0; i < n; ++i) {
    if (!readable[i]) lost.push_back(i);
  }
  if (found.empty() && parity && lost.size() < geometry_.parity_chunks() + 1u) {
    std::vector<std::byte*> slots(n);
    for (unsigned i = 0; i < n; ++i) slots[i] = row(work, i).data();
    std::vector<unsigned> base = lost;
    if (std::find(base.begin(), base.end(), index) == base.end()) base.push_back(index);
    std::sort(base.begin(), base.end());
    // Left out: the unread, the block's own chunk, then one more at a time while the level
    // can still rebuild.
    for (unsigned extra = 0; found.empty() && base.size() + extra <= geometry_.parity_chunks();
         ++extra) {
      for_each_choice(n, base, extra, [&](std::vector<unsigned> missing) {
        std::sort(missing.begin(), missing.end());
        std::memcpy(work.data(), rows.data(), work.size());
        if (!level_->rebuild(slots, missing, length) || !good(row(work, index))) return false;
        found = row(work, index);
        for (unsigned m : missing) should[m] = slots[m];
        return true;
      });
    }
  }
  if (found.empty()) {
    return fail(EIO, "volume bytes [{}, {}): {}", offset, offset + length,
                where.size() == 1 && !parity ? "wrong, and the level keeps no other copy"
                                             : "no copy passes its checksum");
  }

  Recovered recovered;
  for (unsigned i = 0; i < n; ++i) {
    if (!readable[i] || should[i] == nullptr ||
        std::memcmp(should[i], row(rows, i).data(), length) == 0) {
      continue;
    }
    const unsigned member = where[i].member;
    if (!rewrite) {
      recovered.rewritten.push_back(member);
      continue;
    }
    Member& device = *members_[member];
    const uint64_t at = data_offset_ + where[i].member_offset + within;
    VolumeCounters::add(stats_.member_write_ios, 1);
    VolumeCounters::add(stats_.member_read_ios, 1);
    Result<void> rewritten = member_write(device, at, {should[i], length});
    if (rewritten) {
      AlignedBuffer back(length);
      rewritten = member_read(device, at, back.span());
      if (rewritten && std::memcmp(back.data(), should[i], length) != 0) {
        rewritten = fail(EIO, "it reads back different");
      }
    }
    const uint64_t count = device.count_checksum_error();
    if (!rewritten) {
      members_.fail(member, Error{rewritten.error().code,
                                  fmt::format("{} bytes at member byte {} failed their checksum "
                                              "and could not be rewritten: {}",
                                              length, at, rewritten.error().message)});
      continue;
    }
    raid_log().warn(
        "member {} ({}): {} bytes at member byte {} were wrong (volume byte {}); "
        "rewritten from redundancy ({} checksum errors on the device)",
        member, device.name(), length, at, offset, count);
    recovered.rewritten.push_back(member);
  }
  std::memcpy(data.data(), found.data(), length);
  return recovered;
}

}  // namespace stripefs
