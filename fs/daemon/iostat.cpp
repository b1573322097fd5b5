#include "fs/daemon/iostat.hpp"

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
  const VolumeStats v = volume.stats();
  uint64_t logged = 0;
  if (auto* log = dynamic_cast<StripeJournal*>(array.stripe_log()))
    logged = log->stats().bytes_logged;
  const IoEngineStats e = engine != nullptr ? engine->stats() : IoEngineStats{};
  return {{"members", members},
          {"volume",
           {{"full_stripe_writes", v.full_stripe_writes},
            {"full_stripe_bytes", v.full_stripe_bytes},
            {"partial_stripe_writes", v.partial_stripe_writes},
            {"partial_stripe_bytes", v.partial_stripe_bytes},
            {"rmw_writes", v.rmw_writes},
            {"rcw_writes", v.rcw_writes},
            {"prereads", v.prereads},
            {"preread_bytes", v.preread_bytes},
            {"logged_bytes", logged}}},
          {"io",
           {{"engine_requests", e.requests},
            {"engine_fixed_requests", e.fixed_requests},
            {"local_ring_requests", LocalRing::requests()}}}};
}

}  // namespace stripefs::fs
