#include "journal/mirrored_area.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>

#include "raid/aligned_buffer.hpp"

namespace stripefs {

namespace {

// The copies' member names joined by '+' ("-" for a missing one): errors name them.
std::string name_of(const std::vector<MirroredArea::Copy>& copies) {
  std::string name;
  for (const auto& c : copies) {
    if (!name.empty()) name += '+';
    name += c.member != nullptr ? c.member->name() : "-";
  }
  return name;
}

}  // namespace

MirroredArea::MirroredArea(std::vector<Copy> copies, uint64_t offset, uint64_t size, Live live,
                           Failed failed)
    : Member(name_of(copies), size,
             copies.empty() || copies[0].member == nullptr ? DeviceLimits{}
                                                           : copies[0].member->limits()),
      copies_(std::move(copies)),
      offset_(offset),
      live_(std::move(live)),
      failed_(std::move(failed)) {}

void MirroredArea::prefer(size_t index) {
  std::rotate(copies_.begin(), copies_.begin() + static_cast<std::ptrdiff_t>(index),
              copies_.begin() + static_cast<std::ptrdiff_t>(index) + 1);
}

void MirroredArea::read_from(size_t first, MemberRequest request) {
  size_t at = first;
  while (at < copies_.size() && !live(copies_[at])) ++at;
  if (at == copies_.size()) {
    request.done(-EIO);
    return;
  }
  const Copy copy{copies_[at].role, device(copies_[at])};
  MemberRequest mine;
  mine.op = MemberOp::read;
  mine.offset = offset_ + request.offset;
  mine.iov = request.iov;
  mine.merged = request.merged;
  const uint64_t expected = request.length();
  auto shared = std::make_shared<MemberRequest>(std::move(request));
  mine.done = [this, at, copy, expected, shared](int64_t result) mutable {
    if (result >= 0 && static_cast<uint64_t>(result) == expected) {
      shared->done(result);
      return;
    }
    const int error = result < 0 ? static_cast<int>(-result) : EIO;
    if (!failed_) {
      shared->done(-error);
      return;
    }
    // This copy cannot serve reads: take its member out and try the next one.
    failed_(copy.role,
            Error{error, fmt::format("{}: read at byte {} failed: {}", copy.member->name(),
                                     offset_ + shared->offset, std::strerror(error))});
    read_from(at + 1, std::move(*shared));
  };
  copy.member->start(std::move(mine));
}

void MirroredArea::submit(MemberRequest request) {
  if (request.op == MemberOp::read) {
    read_from(0, std::move(request));
    return;
  }
  struct Fanout {
    std::mutex mutex;  // guards all below
    unsigned left = 0;
    unsigned succeeded = 0;
    int error = 0;
    int64_t result = 0;
    std::function<void(int64_t)> done;
  };
  std::vector<Copy> targets;
  for (const Copy& c : copies_) {
    if (live(c)) targets.push_back({c.role, device(c)});
  }
  if (targets.empty()) {
    request.done(-EIO);
    return;
  }
  auto fan = std::make_shared<Fanout>();
  fan->left = static_cast<unsigned>(targets.size());
  fan->done = std::move(request.done);
  const uint64_t expected = request.op == MemberOp::write ? request.length() : 0;
  for (const Copy& c : targets) {
    MemberRequest mine;
    mine.op = request.op;
    mine.offset = request.op == MemberOp::write ? offset_ + request.offset : 0;
    mine.iov = request.iov;
    mine.fua = request.fua;
    mine.merged = request.merged;
    mine.done = [this, fan, c, expected, op = request.op,
                 at = offset_ + request.offset](int64_t result) {
      const bool ok =
          result >= 0 && (op == MemberOp::flush || static_cast<uint64_t>(result) == expected);
      const int error = ok ? 0 : result < 0 ? static_cast<int>(-result) : EIO;
      if (!ok) {
        if (failed_) {
          failed_(c.role, Error{error, fmt::format("{}: {} at byte {} failed: {}", c.member->name(),
                                                   op == MemberOp::write ? "write" : "flush", at,
                                                   std::strerror(error))});
        }
      }
      int64_t answer;
      {
        std::lock_guard lock(fan->mutex);
        if (!ok) {
          if (fan->error == 0) fan->error = error;
        } else {
          ++fan->succeeded;
          fan->result = result;
        }
        if (--fan->left != 0) return;
        // The last copy to answer answers for all: success if one copy holds it (the
        // failed ones are out of service now), unless nobody may fail (creation).
        const bool done_ok = failed_ ? fan->succeeded > 0 : fan->error == 0;
        answer = done_ok ? fan->result : -fan->error;
      }
      fan->done(answer);
    };
    c.member->start(std::move(mine));
  }
}

Result<void> MirroredArea::copy(const Copy& from, const std::vector<Copy>& to) {
  constexpr uint64_t kPiece = 1 << 20;
  AlignedBuffer buffer(static_cast<size_t>(std::min<uint64_t>(kPiece, size())));
  std::vector<bool> dropped(to.size(), false);  // failed (and reported) on the way
  auto drop = [&](size_t i, const Error& why) -> Result<void> {
    if (!failed_) return fail(why);
    failed_(to[i].role, why);
    dropped[i] = true;
    return {};
  };
  for (uint64_t at = 0; at < size(); at += kPiece) {
    auto piece = buffer.span().first(std::min<uint64_t>(kPiece, size() - at));
    if (auto r = member_read(*from.member, offset_ + at, piece); !r) return r;
    for (size_t i = 0; i < to.size(); ++i) {
      if (dropped[i]) continue;
      if (auto w = member_write(*to[i].member, offset_ + at, piece); !w) {
        if (auto d = drop(i, w.error()); !d) return d;
      }
    }
  }
  for (size_t i = 0; i < to.size(); ++i) {
    if (dropped[i]) continue;
    if (auto f = member_flush(*to[i].member); !f) {
      if (auto d = drop(i, f.error()); !d) return d;
    }
  }
  return {};
}

Result<void> MirroredArea::copy_to(unsigned role) {
  auto to = std::find_if(copies_.begin(), copies_.end(), [this, role](const Copy& c) {
    return c.role == role && device(c) != nullptr;
  });
  if (to == copies_.end()) return {};
  auto from = std::find_if(copies_.begin(), copies_.end(),
                           [&](const Copy& c) { return c.role != role && live(c); });
  if (from == copies_.end()) return fail(EIO, "{}: no live copy to copy from", name());
  // The member is held out: a failure cannot take it out of service, only fail its re-add.
  const Copy source{from->role, device(*from)}, target{to->role, device(*to)};
  MirroredArea strict({source, target}, offset_, size());
  return strict.copy(source, {target});
}

Result<void> MirroredArea::copy_from(size_t source) {
  const Copy from{copies_.at(source).role, device(copies_.at(source))};
  if (!live(from)) return fail(EIO, "{}: the copy to copy from is not in service", name());
  std::vector<Copy> to;
  for (size_t i = 0; i < copies_.size(); ++i) {
    if (i != source && live(copies_[i])) to.push_back({copies_[i].role, device(copies_[i])});
  }
  return copy(from, to);
}

}  // namespace stripefs
