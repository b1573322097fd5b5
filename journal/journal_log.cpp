#include "journal/journal_log.hpp"

#include "raid/log.hpp"

namespace stripefs {

spdlog::logger& journal_log() {
  static std::shared_ptr<spdlog::logger> logger = named_logger("journal");
  return *logger;
}

}  // namespace stripefs
