// What `stripefsctl iostat` shows: the shape of the requests each member was sent (sizes,
// merges, alignment: raid/member_shape.hpp), and how the volume's writes reached the
// stripes, as raw counters since the mount. The client takes differences over an interval
// and divides (iostat_view.hpp).
#pragma once
#include <nlohmann/json.hpp>

#include "raid/array.hpp"
#include "raid/io_engine.hpp"

namespace stripefs::fs {

// members[]: role, path, backend, alignment_unit, read and write (requests, bytes, sizes
// keyed "4K" .. ">1M", merged, merged_ios, aligned, straddling), fua_writes, flushes.
// volume: stats' volume group (full_stripe_writes, full_stripe_bytes,
// partial_stripe_bytes, rmw_writes, rcw_writes, prereads, preread_bytes, ...) and
// logged_bytes (the write-hole journal's). io: engine_requests, engine_fixed_requests,
// local_ring_requests.
nlohmann::json iostat_json(Array& array, const IoEngine* engine = nullptr);

}  // namespace stripefs::fs
