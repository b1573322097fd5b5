#include "log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace stripefs {

spdlog::logger& raid_log() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto existing = spdlog::get("raid");
    if (existing) return existing;
    // The factory registers the logger, so spdlog::set_level() reaches it.
    return spdlog::stderr_color_mt("raid");
  }();
  return *logger;
}

}  // namespace stripefs
