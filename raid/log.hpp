// The raid layer's named logger. Libraries never print; they log here.
#pragma once

#include <spdlog/spdlog.h>

namespace stripefs {

spdlog::logger& raid_log();
// The logger called `name`, made (and registered, so spdlog::set_level() reaches it) on
// first use. Each layer's logger is one of these.
std::shared_ptr<spdlog::logger> named_logger(const char* name);

}  // namespace stripefs
