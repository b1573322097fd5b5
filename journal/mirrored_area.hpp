// One area (a byte range at the same offset) on several members, seen as one device: where
// the write-hole journal lives when it has no device of its own. Writes and flushes go to
// every live copy and succeed when one does; a copy that fails is reported (the Volume
// then takes its member out) and skipped from then on. Reads come from the first live copy.
//
// Copies can differ only after a crash (a write that reached some of them) or when a stale
// member was forced back in: choose the freshest (open_member_journal_area in
// array_journal.hpp does) and make the others equal with `copy_from` before anything reads
// the area.
#pragma once

#include <functional>
#include <vector>

#include "raid/member.hpp"

namespace stripefs {

class MirroredArea final : public Member {
 public:
  struct Copy {
    unsigned role;
    Member* member;
  };
  // Whether a copy's member is still in service, and what to do when one fails. Without
  // `failed`, a failed copy fails the request (creation: nothing is running yet).
  using Live = std::function<bool(unsigned role)>;
  using Failed = std::function<void(unsigned role, const Error& why)>;

  // `copies` in the order reads prefer them; each holds `size` bytes at `offset`.
  MirroredArea(std::vector<Copy> copies, uint64_t offset, uint64_t size, Live live = nullptr,
               Failed failed = nullptr);

  void submit(MemberRequest request) override;

  // Which device holds a role's copy now: by default the one given at construction. An array
  // whose roles can change devices (a rebuild onto a new one) resolves them through this,
  // set before the first request.
  using Resolve = std::function<Member*(unsigned role)>;
  void set_resolve(Resolve resolve) { resolve_ = std::move(resolve); }

  const std::vector<Copy>& copies() const { return copies_; }
  uint64_t offset() const { return offset_; }
  // Copies the whole area from copy `source` onto every other live copy. Blocking. A copy
  // that cannot take it is failed (or, without `failed`, the call fails).
  Result<void> copy_from(size_t source);
  // Copies the whole area from the first live copy onto the copy of member `role`, live or
  // not (a member being re-added). Nothing when `role` keeps no copy. Blocking.
  Result<void> copy_to(unsigned role);
  // Moves copy `index` to the front, so reads come from it.
  void prefer(size_t index);

 private:
  Member* device(const Copy& c) const { return resolve_ ? resolve_(c.role) : c.member; }
  bool live(const Copy& c) const { return device(c) != nullptr && (!live_ || live_(c.role)); }
  void read_from(size_t first, MemberRequest request);
  // The whole area from `from` onto each of `to`; a target that fails is reported through
  // `failed` and dropped (without `failed`, the copy fails).
  Result<void> copy(const Copy& from, const std::vector<Copy>& to);

  std::vector<Copy> copies_;
  const uint64_t offset_;
  Live live_;
  Failed failed_;
  Resolve resolve_;
};

}  // namespace stripefs
