#include "raid/units.hpp"

#include <cctype>
#include <charconv>
#include <cmath>

namespace stripefs {

Result<uint64_t> parse_size(std::string_view text) {
  double value = 0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  auto [rest, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || value < 0 || text.empty()) {
    return fail(EINVAL, "invalid size '{}' (expected a number with an optional K/M/G/T suffix)",
                text);
  }
  std::string suffix(rest, end);
  for (char& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double scale = 1;
  if (!suffix.empty()) {
    const char unit = suffix[0];
    const std::string tail = suffix.substr(1);
    if (tail != "" && tail != "B" && tail != "IB") {
      return fail(EINVAL, "invalid size '{}': unknown unit '{}'", text, std::string(rest, end));
    }
    switch (unit) {
      case 'B':
        scale = tail.empty() ? 1 : -1;
        break;
      case 'K':
        scale = 1024.0;
        break;
      case 'M':
        scale = 1024.0 * 1024;
        break;
      case 'G':
        scale = 1024.0 * 1024 * 1024;
        break;
      case 'T':
        scale = 1024.0 * 1024 * 1024 * 1024;
        break;
      default:
        scale = -1;
    }
    if (scale < 0) {
      return fail(EINVAL, "invalid size '{}': unknown unit '{}'", text, std::string(rest, end));
    }
  }
  const double bytes = value * scale;
  if (bytes >= 18446744073709551615.0 || bytes != std::floor(bytes)) {
    return fail(EINVAL, "invalid size '{}': not a whole number of bytes", text);
  }
  return static_cast<uint64_t>(bytes);
}

std::string format_size(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  if (unit == 0) return fmt::format("{} B", bytes);
  return fmt::format("{:.1f} {}", value, kUnits[unit]);
}

}  // namespace stripefs
