#include "raid/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace stripefs {

std::shared_ptr<spdlog::logger> named_logger(const char* name) {
  auto existing = spdlog::get(name);
  if (existing) return existing;
  return spdlog::stderr_color_mt(name);  // registers it
}

spdlog::logger& raid_log() {
  static std::shared_ptr<spdlog::logger> logger = named_logger("raid");
  return *logger;
}

}  // namespace stripefs
