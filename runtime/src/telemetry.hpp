// Optional machine-readable events for fleet dashboards: one JSON object per
// line, to a file (appended) or stderr, chosen by ATTNJIT_TELEMETRY (see
// Config::telemetry). Off unless configured; emitting never throws, since a
// broken dashboard pipe must not fail a kernel load.
//
// Events (every line also has "event", "time" (ISO 8601 UTC) and "pid"):
//   compile  NVRTC ran: spec, key, arch, seconds (NVRTC time), nvrtc
//   miss     a kernel not yet in this process's memory was needed: spec, key,
//            arch, seconds (the whole lookup: disk read, or wait + compile +
//            store), from ("disk": found in the on-disk cache; "compiled": not
//            there either, so it was compiled; "error": the lookup failed, e.g.
//            mode require or a compile error, with "error": the message)
#pragma once
#include <nlohmann/json.hpp>

#include <string>

namespace attnjit::telemetry {

// Appends `event` (plus time and pid) as one line to `target`: "" does
// nothing, "stderr" writes to stderr, anything else is a file path, opened
// once per process with O_APPEND so that lines from several processes do
// not interleave. A write failure is logged once as a warning.
void emit(const std::string& target, nlohmann::json event);

// Now as ISO 8601 UTC to the second ("2026-11-28T08:49:14Z"): events' "time"
// and cache entries' "created".
std::string iso_now();

}  // namespace attnjit::telemetry
