// The journal layer's named logger.
#pragma once

#include <spdlog/spdlog.h>

namespace stripefs {

spdlog::logger& journal_log();

}  // namespace stripefs
