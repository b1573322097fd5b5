#include <spdlog/sinks/stdout_color_sinks.h>

#include "fs_log.hpp"

namespace stripefs {

spdlog::logger& fs_log() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto existing = spdlog::get("fs");
    if (existing) return existing;
    // The factory registers the logger, so spdlog::set_level() reaches it.
    return spdlog::stderr_color_mt("fs");
  }();
  return *logger;
}

}  // namespace stripefs
