// Errors as values: every fallible operation in stripefs returns Result<T>.
#pragma once

#include <cerrno>
#include <expected>
#include <string>
#include <utility>

#include <fmt/format.h>

namespace stripefs {

// An error carries the errno a caller (ultimately FUSE) should see and one line for a human
// that names what is wrong: the member, the block, the field.
struct Error {
  int code = EIO;
  std::string message;
};

template <class T>
using Result = std::expected<T, Error>;

template <class... Args>
std::unexpected<Error> fail(int code, fmt::format_string<Args...> format, Args&&... args) {
  return std::unexpected(Error{code, fmt::format(format, std::forward<Args>(args)...)});
}

inline std::unexpected<Error> fail(Error error) {
  return std::unexpected(std::move(error));
}

}  // namespace stripefs
