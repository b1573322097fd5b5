#include "raid/replacing_member.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>

#include "raid/aligned_buffer.hpp"

namespace stripefs {

namespace {

// A piece of the copy. The most a write over the pieces being copied waits for is about two
// pieces' transfers (the next piece is read while this one is written).
constexpr uint64_t kPieceBytes = 4u << 20;

}  // namespace

ReplacingMember::ReplacingMember(Member& old, Member& replacement, uint64_t begin, uint64_t end,
                                 std::optional<uint64_t> copied)
    : Member(old.name(), old.size(), old.limits()),
      old_(old),
      replacement_(replacement),
      begin_(begin),
      end_(end),
      copied_(std::clamp(copied.value_or(begin), begin, end)) {}

uint64_t ReplacingMember::copied() const {
  std::lock_guard lock(mutex_);
  return copied_;
}

std::optional<Error> ReplacingMember::replacement_failed() const {
  std::lock_guard lock(mutex_);
  return replacement_error_;
}

bool ReplacingMember::old_failed() const {
  std::lock_guard lock(mutex_);
  return old_failed_;
}

bool ReplacingMember::overlaps_writing(uint64_t begin, uint64_t end) const {
  return std::any_of(writing_.begin(), writing_.end(),
                     [&](const Writing& w) { return w.begin < end && begin < w.end; });
}

uint64_t ReplacingMember::count_corrected() {
  std::lock_guard lock(mutex_);
  return alone_ == &replacement_ ? replacement_.count_corrected() : old_.count_corrected();
}

uint64_t ReplacingMember::count_checksum_error() {
  std::lock_guard lock(mutex_);
  return alone_ == &replacement_ ? replacement_.count_checksum_error()
                                 : old_.count_checksum_error();
}

void ReplacingMember::hand_over() {
  std::lock_guard lock(mutex_);
  alone_ = &replacement_;
}

void ReplacingMember::hand_over_back() {
  std::lock_guard lock(mutex_);
  alone_ = &old_;
}

void ReplacingMember::drain() {
  std::unique_lock lock(mutex_);
  drained_.wait(lock, [this] { return in_flight_ == 0; });
}

void ReplacingMember::submit(MemberRequest request) {
  Member* only = nullptr;  // a read, or anything once handed over: one device
  {
    std::lock_guard lock(mutex_);
    if (alone_ != nullptr) {
      only = alone_;
    } else if (request.op == MemberOp::read) {
      only = &old_;
    }
  }
  if (only != nullptr) {
    // Counted on the device itself: status shows its figures, not the stand-in's.
    const MemberOp op = request.op;
    const uint64_t length = request.length();
    request.done = [only, op, length, done = std::move(request.done)](int64_t result) {
      const bool ok =
          result >= 0 && (op == MemberOp::flush || static_cast<uint64_t>(result) == length);
      only->count(op, ok ? length : 0, ok);
      done(result);
    };
    return only->submit(std::move(request));
  }
  bool mirror = false;
  uint64_t id = 0;
  {
    std::lock_guard lock(mutex_);
    const bool live = !replacement_error_.has_value();
    if (request.op == MemberOp::flush) {
      mirror = live;
    } else if (request.offset >= begin_ && live) {
      const uint64_t begin = request.offset, end = begin + request.length();
      if (copying_ && begin < copying_->second && copying_->first < end) {
        waiting_.push_back(std::move(request));  // sent on once the piece is copied
        return;
      }
      mirror = begin < copied_;
      // Tracked, so that a piece copied (or copied again) over it waits for it.
      id = next_id_++;
      writing_.push_back({id, begin, end});
    }
    ++in_flight_;
  }
  forward(std::move(request), mirror, id);
}

void ReplacingMember::forward(MemberRequest request, bool mirror, uint64_t id) {
  const MemberOp op = request.op;
  const uint64_t length = request.length();
  auto done = std::move(request.done);
  if (!mirror) {
    request.done = [this, op, length, id, done = std::move(done)](int64_t result) {
      old_.count(op, result >= 0 ? length : 0, result >= 0);
      finished(id);
      done(result);
    };
    return old_.submit(std::move(request));
  }
  // Both devices; the caller hears the old one's result once both answered.
  struct Pair {
    std::mutex mutex;
    int answered = 0;
    int64_t old_result = 0;
    std::function<void(int64_t)> done;
  };
  auto pair = std::make_shared<Pair>();
  pair->done = std::move(done);
  auto answer = [this, pair, id](bool from_old, int64_t result) {
    std::function<void(int64_t)> done;
    int64_t old_result = 0;
    {
      std::lock_guard lock(pair->mutex);
      if (from_old) pair->old_result = result;
      if (++pair->answered < 2) return;
      done = std::move(pair->done);
      old_result = pair->old_result;
    }
    finished(id);
    done(old_result);
  };
  MemberRequest copy = request;  // the same buffers: both devices get the same bytes
  request.done = [this, op, length, answer](int64_t result) {
    old_.count(op, result >= 0 ? length : 0, result >= 0);
    answer(true, result);
  };
  copy.done = [this, op, length, answer](int64_t result) {
    const bool ok =
        result >= 0 && (op == MemberOp::flush || static_cast<uint64_t>(result) == length);
    replacement_.count(op, ok ? length : 0, ok);
    if (!ok) {
      const int error = result < 0 ? static_cast<int>(-result) : EIO;
      note_replacement_failure(Error{
          error, fmt::format("{}: {} failed: {}", replacement_.name(),
                             op == MemberOp::flush ? "flush" : "write", std::strerror(error))});
    }
    answer(false, result);
  };
  old_.submit(std::move(request));
  replacement_.submit(std::move(copy));
}

void ReplacingMember::finished(uint64_t id) {
  std::lock_guard lock(mutex_);
  if (id != 0) std::erase_if(writing_, [id](const Writing& w) { return w.id == id; });
  --in_flight_;
  drained_.notify_all();
}

void ReplacingMember::note_replacement_failure(const Error& why) {
  std::lock_guard lock(mutex_);
  if (!replacement_error_) replacement_error_ = why;
}

// Pipelined in two, as a rebuild is: while one piece is written to the replacement, the
// next is read from the old device, so on devices the copy goes at one device's rate, not
// half of it. Both pieces count as being copied (writes over them wait); copied_ moves up
// as each piece's write is done.
Result<void> ReplacingMember::copy(uint64_t length,
                                   const std::function<bool(uint64_t)>& piece_done) {
  if (buffer_.size() == 0) buffer_ = AlignedBuffer(2 * kPieceBytes);  // kept: one per replace
  uint64_t at = copied();
  const uint64_t stop = std::min(end_, at + length);
  if (at >= stop) return {};
  // Marks [begin, end) as being copied (with whatever is being copied already) and waits
  // out the writes in flight over it; false if the replacement has failed.
  const auto claim = [this](uint64_t begin, uint64_t end) {
    std::unique_lock lock(mutex_);
    if (replacement_error_) return false;
    copying_ = {copying_ ? copying_->first : begin, end};
    drained_.wait(lock, [&] { return !overlaps_writing(begin, end); });
    return true;
  };
  const auto piece_at = [&](uint64_t begin, unsigned index) {
    return buffer_.span().subspan(index % 2 * kPieceBytes, std::min(kPieceBytes, stop - begin));
  };
  const auto release = [this](std::optional<std::pair<uint64_t, uint64_t>> still) {
    release_piece(still);
  };
  const auto old_read_failed = [this] {
    std::lock_guard lock(mutex_);
    old_failed_ = true;
  };

  unsigned index = 0;
  std::span<std::byte> data = piece_at(at, index);
  if (!claim(at, at + data.size())) return fail(*replacement_failed());
  Result<void> status = member_read(old_, at, data);
  if (!status) old_read_failed();
  while (status) {
    const uint64_t end = at + data.size();
    std::future<Result<void>> written = member_start(replacement_, MemberOp::write, at, data);
    std::optional<std::future<Result<void>>> next_read;
    std::span<std::byte> next;
    if (end < stop) {
      next = piece_at(end, index + 1);
      if (claim(end, end + next.size())) {
        next_read = member_start(old_, MemberOp::read, end, next);
      }
    }
    status = written.get();
    if (!status) note_replacement_failure(status.error());
    Result<void> read = next_read ? next_read->get() : Result<void>{};
    bool goes_on = true;
    if (status) {
      {
        std::lock_guard lock(mutex_);
        copied_ = end;
      }
      if (piece_done) goes_on = piece_done(end);
    }
    if (!status || !next_read || !read || !goes_on) {
      if (status && !read) {
        old_read_failed();
        status = read;
      } else if (status && goes_on && !next_read && end < stop) {
        status = fail(*replacement_failed());  // it failed meanwhile: claim() refused
      }
      break;
    }
    release(std::pair{end, end + next.size()});
    at = end;
    data = next;
    ++index;
  }
  release(std::nullopt);
  return status;  // an error names the device
}

// The writes that waited go on (those over a piece still being copied wait again).
void ReplacingMember::release_piece(std::optional<std::pair<uint64_t, uint64_t>> still) {
  std::vector<MemberRequest> waiting;
  {
    std::lock_guard lock(mutex_);
    copying_ = still;
    waiting = std::exchange(waiting_, {});
  }
  for (MemberRequest& r : waiting) submit(std::move(r));
}

Result<void> ReplacingMember::recopy(uint64_t begin, uint64_t end) {
  if (buffer_.size() == 0) buffer_ = AlignedBuffer(2 * kPieceBytes);
  end = std::min(end, copied());
  for (uint64_t at = std::max(begin, begin_); at < end; at += kPieceBytes) {
    const auto piece = buffer_.span().subspan(0, std::min(kPieceBytes, end - at));
    {
      std::unique_lock lock(mutex_);
      if (replacement_error_) return fail(*replacement_error_);
      copying_ = {at, at + piece.size()};
      drained_.wait(lock, [&] { return !overlaps_writing(at, at + piece.size()); });
    }
    Result<void> done = member_read(old_, at, piece);
    if (!done) {
      std::lock_guard lock(mutex_);
      old_failed_ = true;
    } else if (done = member_write(replacement_, at, piece); !done) {
      note_replacement_failure(done.error());
    }
    release_piece(std::nullopt);
    if (!done) return done;
  }
  return {};
}

}  // namespace stripefs
