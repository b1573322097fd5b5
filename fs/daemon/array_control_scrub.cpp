// The scrub request of the control plane (array_control.hpp): start, stop, status.
#include "fs/core/fs_log.hpp"
#include "fs/daemon/array_control.hpp"
#include "fs/daemon/status.hpp"

namespace stripefs::fs {

using nlohmann::json;

Result<json> ArrayControl::scrub(const json& request) {
  const json& action = request.value("action", json());
  if (!action.is_string()) {
    return stripefs::fail(EINVAL, "the request needs \"action\": start, stop or status");
  }
  const std::string what = action.get<std::string>();
  const json& repair = request.value("repair", json(false));
  if (!repair.is_boolean()) return stripefs::fail(EINVAL, "\"repair\" must be true or false");
  if (what == "start") {
    if (auto r = array_.start_scrub(repair.get<bool>()); !r) return stripefs::fail(r.error());
    fs_log().warn("control: scrub started{}", repair.get<bool>() ? " (repairing)" : "");
  } else if (what == "stop") {
    if (!array_.scrub_progress().running) return stripefs::fail(EINVAL, "no scrub is running");
    array_.stop_scrub();
    fs_log().warn("control: scrub stopped on request");
  } else if (what != "status") {
    return stripefs::fail(EINVAL, "scrub action '{}': start, stop or status", what);
  }
  return json{{"scrub", scrub_json(array_)}};
}

}  // namespace stripefs::fs
