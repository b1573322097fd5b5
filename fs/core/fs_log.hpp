// The filesystem layer's named logger.
#pragma once
#include <spdlog/spdlog.h>

namespace stripefs {
spdlog::logger& fs_log();
}  // namespace stripefs
