// The bytes of one cache entry file, and their verification.
//
//   offset  size  field
//   0       8     magic "ATTNJITC"
//   8       4     format version (u32, little-endian)
//   12      4     header length H (u32, little-endian)
//   16      8     payload length P (u64, little-endian)
//   24      64    SHA-256 of the header, lower-case hex
//   88      H     header: compact JSON (key, arch, kernel_names, shared_mem_bytes,
//                 payload_bytes, payload_sha256, metadata), keys sorted
//   88+H    P     payload: the cubin
//
// The header checksum exists so that a flipped bit anywhere in the file is
// caught: without it, a flip inside the human-readable metadata would still
// parse as JSON and load silently. Any change to these bytes must bump
// kVersion (a golden test pins them).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "cache/disk_cache.hpp"

namespace attnjit::cache::entry_format {

inline constexpr char kMagic[8] = {'A', 'T', 'T', 'N', 'J', 'I', 'T', 'C'};
inline constexpr uint32_t kVersion = 1;
inline constexpr size_t kPrefixBytes = 8 + 4 + 4 + 8 + 64;

std::string serialize(const Entry& entry);

// Each check returns an empty string when the bytes are fine, else a sentence
// saying what is wrong (it goes into the warning a user reads).

// Parses and checks the fixed prefix and the JSON header. `head` may be the
// whole file or just its first kPrefixBytes + H bytes; `file_size` is the
// size of the whole file, so a truncated payload is caught here too.
struct Header {
  uint32_t header_bytes = 0;
  uint64_t payload_bytes = 0;
  nlohmann::json json;
};
std::string parse_header(std::string_view head, uint64_t file_size, Header& out);
// How many bytes from the start of the file parse_header needs, read from the
// fixed prefix; 0 when `prefix` is too short or not an entry of this version.
uint64_t header_end(std::string_view prefix);

// Everything: prefix, header, key and arch equal to what the file name says,
// payload length and SHA-256. Fills `out` only when the entry is sound.
std::string parse_entry(std::string_view file, const std::string& arch, const std::string& key,
                        Entry& out);

}  // namespace attnjit::cache::entry_format
