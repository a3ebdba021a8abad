// Names of the cache's temporary files, and whether their writer still lives.
//
// A publish writes ".<key>.tmp.<host>.<pid>.<random>" and renames it over the
// entry. A writer killed in between leaves that file behind; naming the host
// and pid lets a later process on the same host see that the writer is gone
// and remove the file at once, instead of waiting for it to age past
// DiskCache::kStaleTemporaryAge (the only test available for files from
// another host, or in the older ".<key>.tmp.<pid>.<random>" form).
#pragma once
#include <chrono>
#include <optional>
#include <string>

namespace attnjit::cache::temp_files {

// This host's name reduced to [A-Za-z0-9-] (so it holds no '.'), or "host".
const std::string& this_host();
// What follows "<prefix>" in a new temporary's name, before the random part: "<host>.<pid>.".
std::string writer_tag();

struct Writer {
  std::string host;  // empty for the older form, which did not record it
  long pid = 0;
};
// The writer recorded in a temporary's file name; nullopt when it does not parse.
std::optional<Writer> writer_of(const std::string& file_name);

enum class WriterState { Running, Gone, Unknown };  // Unknown: another host, or an older name
WriterState writer_state(const std::string& file_name);
const char* to_string(WriterState s) noexcept;

// A temporary younger than this is never reaped on the strength of its
// writer's pid alone: a pid namespace we cannot see into (a container with
// our host name) could make a live writer look gone.
inline constexpr std::chrono::seconds kDeadWriterGrace{30};

}  // namespace attnjit::cache::temp_files
