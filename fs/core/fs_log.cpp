#include "fs/core/fs_log.hpp"

#include "raid/log.hpp"

namespace stripefs {

spdlog::logger& fs_log() {
  static std::shared_ptr<spdlog::logger> logger = named_logger("fs");
  return *logger;
}

}  // namespace stripefs
