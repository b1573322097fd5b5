// Checks run in a forked child that has become another user (nobody, or root without a
// capability), reported to the parent test as text: no gtest in the child, whose assertions
// would report into a copy of the parent's state that nobody reads.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>

#include "mounted/mounted_fixture.hpp"

namespace stripefs::test {

inline constexpr uid_t kNobody = 65534;
inline constexpr gid_t kNogroup = 65534;

class ChildChecks {
 public:
  void expect_errno(long result, int err, int expected, const char* what);
  void expect_ok(long result, int err, const char* what);
  void expect(bool condition, const std::string& what);
  const std::string& failures() const { return failures_; }

 private:
  std::string failures_;
};

#define CHILD_ERRNO(checks, expected, expr)                 \
  do {                                                      \
    errno = 0;                                              \
    const long result_ = static_cast<long>(expr);           \
    (checks).expect_errno(result_, errno, expected, #expr); \
  } while (0)
#define CHILD_OK(checks, expr)                    \
  do {                                            \
    errno = 0;                                    \
    const long result_ = static_cast<long>(expr); \
    (checks).expect_ok(result_, errno, #expr);    \
  } while (0)

// Who the child becomes; false (errno set) when it could not.
bool become_nobody();               // nobody:nogroup, no supplementary groups
bool become_root_without_fsetid();  // still root, without CAP_FSETID in its effective set

// Runs `body` in a child once `become` has made it someone else and it can reach `reachable`
// (a directory every parent of which others may search); fails the calling test with
// whatever the child reports.
void run_in_child(const std::string& reachable, bool (*become)(),
                  const std::function<void(ChildChecks&)>& body);

}  // namespace stripefs::test
