#include "fs/daemon/iostat.hpp"

#include "fs/daemon/status.hpp"
#include "journal/stripe_journal.hpp"
#include "raid/local_ring.hpp"
#include "raid/member_devices.hpp"

namespace stripefs::fs {

namespace {

using nlohmann::json;

json direction_json(const MemberShape::Direction& d) {
  json sizes = json::object();
  for (unsigned b = 0; b < kSizeBuckets; ++b) sizes[size_bucket_name(b)] = d.sizes[b];
  return {{"requests", d.requests},    {"bytes", d.bytes},           {"sizes", sizes},
          {"merged", d.merged},        {"merged_ios", d.merged_ios}, {"aligned", d.aligned},
          {"straddling", d.straddling}};
}

}  // namespace

json iostat_json(Array& array, const IoEngine* engine) {
  json members = json::array();
  Volume& volume = array.volume();
  for (unsigned role = 0; role < volume.geometry().members(); ++role) {
    const Member* m = array.member_device(role);
    if (m == nullptr) {
      members.push_back({{"role", role}, {"path", ""}});
      continue;
    }
    const MemberShape shape = m->shape();
    members.push_back({{"role", role},
                       {"path", m->name()},
                       {"backend", std::string(member_backend_name(*m))},
                       {"alignment_unit", preferred_io_size(m->limits())},
                       {"read", direction_json(shape.read)},
                       {"write", direction_json(shape.write)},
                       {"fua_writes", shape.fua_writes},
                       {"flushes", shape.flushes}});
  }
  json volume_counters = volume_stats_json(volume.stats());
  uint64_t logged = 0;
  if (auto* log = dynamic_cast<StripeJournal*>(array.stripe_log()))
    logged = log->stats().bytes_logged;
  volume_counters["logged_bytes"] = logged;
  const IoEngineStats e = engine != nullptr ? engine->stats() : IoEngineStats{};
  return {{"members", members},
          {"volume", volume_counters},
          {"io",
           {{"engine_requests", e.requests},
            {"engine_fixed_requests", e.fixed_requests},
            {"local_ring_requests", LocalRing::requests()},
            {"local_ring_fixed_requests", LocalRing::fixed_requests()}}}};
}

}  // namespace stripefs::fs
