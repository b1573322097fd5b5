#include <spdlog/sinks/stdout_color_sinks.h>

#include "journal_log.hpp"

namespace stripefs {

spdlog::logger& journal_log() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto existing = spdlog::get("journal");
    if (existing) return existing;
    // The factory registers the logger, so spdlog::set_level() reaches it.
    return spdlog::stderr_color_mt("journal");
  }();
  return *logger;
}

}  // namespace stripefs
