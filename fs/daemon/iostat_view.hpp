// stripefsctl iostat's side: differences between two of the daemon's iostat answers, the
// figures derived from them, and the table people read.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace stripefs::fs {

// `now` minus `before`, number by number (members matched by position, a member whose path
// changed taken whole from `now`; a member's role and alignment unit, and anything not a
// number, taken from `now`). Counters since the mount
// become counters over the interval between them.
nlohmann::json iostat_delta(const nlohmann::json& now, const nlohmann::json& before);

// Adds what the counters mean to their user: under "volume", full_stripe_fraction (of the
// bytes written through the volume, the share written as full stripes),
// preread_bytes_per_byte and logged_bytes_per_byte (member bytes read before, and logged
// in the write-hole journal for, each byte written); under "io", fixed_fraction. Zero when
// nothing was written (or requested).
void add_iostat_ratios(nlohmann::json& s);

// The table: one line per member (requests, MiB, merged, aligned, straddling, for reads
// and writes; FUA writes and flushes), the request-size histograms, the volume's stripe
// paths and the ring's counts. `heading` says what the figures cover.
void print_iostat(const nlohmann::json& s, const std::string& heading);

}  // namespace stripefs::fs
