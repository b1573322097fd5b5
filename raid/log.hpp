// The raid layer's named logger. Libraries never print; they log here.
#pragma once

#include <spdlog/spdlog.h>

namespace stripefs {

spdlog::logger& raid_log();

}  // namespace stripefs
