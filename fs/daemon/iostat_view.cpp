#include "fs/daemon/iostat_view.hpp"

#include <algorithm>
#include <cstdio>

#include "raid/member_shape.hpp"

namespace stripefs::fs {

using nlohmann::json;

json iostat_delta(const json& now, const json& before) {
  if (now.is_number_integer() && before.is_number_integer()) {
    const auto value = [](const json& n) -> uint64_t {
      if (n.is_number_unsigned()) return n.get<uint64_t>();
      return static_cast<uint64_t>(std::max<int64_t>(0, n.get<int64_t>()));
    };
    const uint64_t a = value(now), b = value(before);
    return a >= b ? a - b : 0;  // a counter never goes back; a new daemon would restart it
  }
  if (now.is_object() && before.is_object()) {
    json out = json::object();
    for (const auto& [key, value] : now.items()) {
      // What names a member, not what it did.
      const bool identity = key == "role" || key == "alignment_unit";
      out[key] = before.contains(key) && !identity ? iostat_delta(value, before[key]) : value;
    }
    return out;
  }
  if (now.is_array() && before.is_array() && now.size() == before.size()) {
    json out = json::array();
    for (size_t i = 0; i < now.size(); ++i) {
      // A role whose device changed (a rebuild or replace finished) has only the new
      // device's counts, since it came.
      const bool swapped =
          now[i].is_object() && before[i].is_object() &&
          now[i].value("path", std::string()) != before[i].value("path", std::string());
      out.push_back(swapped ? now[i] : iostat_delta(now[i], before[i]));
    }
    return out;
  }
  return now;
}

namespace {

// object[key], or an empty object when it has none (a const json's operator[] must not be
// asked for a key it lacks).
const json& field(const json& object, const char* key) {
  static const json empty = json::object();
  return object.is_object() && object.contains(key) ? object[key] : empty;
}

// An alignment unit as the table shows it: 512, 4K, 1M (a loop device's is 512 bytes).
std::string unit_text(uint64_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + "M";
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes / 1024) + "K";
  return std::to_string(bytes);
}

uint64_t number(const json& object, const char* key) {
  return object.contains(key) && object[key].is_number() ? object[key].get<uint64_t>() : 0;
}

double ratio(uint64_t part, uint64_t whole) {
  return whole == 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(whole);
}

double mib(uint64_t bytes) {
  return static_cast<double>(bytes) / (1 << 20);
}

}  // namespace

void add_iostat_ratios(json& s) {
  if (s.contains("volume")) {
    json& v = s["volume"];
    const uint64_t full = number(v, "full_stripe_bytes");
    const uint64_t written = full + number(v, "partial_stripe_bytes");
    v["full_stripe_fraction"] = ratio(full, written);
    v["preread_bytes_per_byte"] = ratio(number(v, "preread_bytes"), written);
    v["logged_bytes_per_byte"] = ratio(number(v, "logged_bytes"), written);
  }
  if (s.contains("io")) {
    json& io = s["io"];
    // Of every request io_uring carried (the engine's and the workers' own rings).
    io["fixed_fraction"] =
        ratio(number(io, "engine_fixed_requests") + number(io, "local_ring_fixed_requests"),
              number(io, "engine_requests") + number(io, "local_ring_requests"));
  }
}

void print_iostat(const json& s, const std::string& heading) {
  std::printf("%s\n", heading.c_str());
  std::printf("%-4s %-24s %6s  %9s %9s %7s %7s %7s  %9s %9s %7s %7s %7s  %6s %6s\n", "role",
              "device", "unit", "reads", "read MiB", "merged", "aligned", "straddl", "writes",
              "write MiB", "merged", "aligned", "straddl", "fua", "flush");
  const json members = s.value("members", json::array());
  for (const json& m : members) {
    std::string path = m.value("path", std::string());
    if (path.size() > 24) path = "..." + path.substr(path.size() - 21);
    if (!m.contains("read")) {
      std::printf("%-4u %-24s (no device)\n", m.value("role", 0u), path.c_str());
      continue;
    }
    const json& r = field(m, "read");
    const json& w = field(m, "write");
    std::printf(
        "%-4u %-24s %6s  %9llu %9.1f %7llu %7llu %7llu  %9llu %9.1f %7llu %7llu %7llu  %6llu "
        "%6llu\n",
        m.value("role", 0u), path.c_str(), unit_text(number(m, "alignment_unit")).c_str(),
        static_cast<unsigned long long>(number(r, "requests")), mib(number(r, "bytes")),
        static_cast<unsigned long long>(number(r, "merged")),
        static_cast<unsigned long long>(number(r, "aligned")),
        static_cast<unsigned long long>(number(r, "straddling")),
        static_cast<unsigned long long>(number(w, "requests")), mib(number(w, "bytes")),
        static_cast<unsigned long long>(number(w, "merged")),
        static_cast<unsigned long long>(number(w, "aligned")),
        static_cast<unsigned long long>(number(w, "straddling")),
        static_cast<unsigned long long>(number(m, "fua_writes")),
        static_cast<unsigned long long>(number(m, "flushes")));
  }
  for (const char* direction : {"read", "write"}) {
    std::printf("%s request sizes:\n%-4s", direction, "role");
    bool header_done = false;
    for (const json& m : members) {
      if (!m.contains(direction)) continue;
      const json& sizes = field(field(m, direction), "sizes");
      // In size order: the object's own order is by name.
      if (!header_done) {
        for (unsigned b = 0; b < kSizeBuckets; ++b) std::printf(" %8s", size_bucket_name(b));
        std::printf("\n");
        header_done = true;
      }
      std::printf("%-4u", m.value("role", 0u));
      for (unsigned b = 0; b < kSizeBuckets; ++b) {
        std::printf(" %8llu", static_cast<unsigned long long>(number(sizes, size_bucket_name(b))));
      }
      std::printf("\n");
    }
    if (!header_done) std::printf("\n");
  }
  if (s.contains("volume")) {
    const json& v = s["volume"];
    std::printf(
        "volume: %llu full-stripe writes (%.1f%% of the bytes written), %llu read-modify-write, "
        "%llu reconstruct-write; %llu prereads (%.3f bytes read per byte written); %.3f bytes "
        "logged per byte written\n",
        static_cast<unsigned long long>(number(v, "full_stripe_writes")),
        100.0 * v.value("full_stripe_fraction", 0.0),
        static_cast<unsigned long long>(number(v, "rmw_writes")),
        static_cast<unsigned long long>(number(v, "rcw_writes")),
        static_cast<unsigned long long>(number(v, "prereads")),
        v.value("preread_bytes_per_byte", 0.0), v.value("logged_bytes_per_byte", 0.0));
  }
  if (s.contains("io")) {
    const json& io = s["io"];
    std::printf(
        "io: %llu engine requests (%llu with fixed buffers), %llu on FUSE workers' own rings "
        "(%llu with fixed buffers)\n",
        static_cast<unsigned long long>(number(io, "engine_requests")),
        static_cast<unsigned long long>(number(io, "engine_fixed_requests")),
        static_cast<unsigned long long>(number(io, "local_ring_requests")),
        static_cast<unsigned long long>(number(io, "local_ring_fixed_requests")));
  }
}

}  // namespace stripefs::fs
