#include "cache/entry_format.hpp"

#include <fmt/format.h>

#include <cstring>

#include "attnjit/error.hpp"
#include "sha256.hpp"

namespace attnjit::cache::entry_format {

namespace {

constexpr size_t kVersionAt = 8, kHeaderLenAt = 12, kPayloadLenAt = 16, kHeaderShaAt = 24;
constexpr size_t kShaHexBytes = 64;

// Explicit little-endian, so entries built on one machine load on any other.
template <typename T>
void put_le(std::string& out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

template <typename T>
T get_le(std::string_view in, size_t at) {
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(static_cast<unsigned char>(in[at + i])) << (8 * i);
  return v;
}

std::string check_header_fields(const nlohmann::json& h) {
  if (!h.is_object()) return "header is not a JSON object";
  auto need = [&](const char* name, bool ok) -> std::string {
    if (!h.contains(name)) return fmt::format("header lacks the field '{}'", name);
    if (!ok) return fmt::format("header field '{}' has the wrong type", name);
    return {};
  };
  std::string p;
  if (!(p = need("key", h.contains("key") && h["key"].is_string())).empty()) return p;
  if (!(p = need("arch", h.contains("arch") && h["arch"].is_string())).empty()) return p;
  if (!(p = need("kernel_names", h.contains("kernel_names") && h["kernel_names"].is_array())).empty()) return p;
  for (const auto& n : h["kernel_names"])
    if (!n.is_string()) return "header field 'kernel_names' holds a non-string";
  if (!(p = need("shared_mem_bytes", h.contains("shared_mem_bytes") && h["shared_mem_bytes"].is_number_unsigned())).empty()) return p;
  if (h["shared_mem_bytes"].get<uint64_t>() > UINT32_MAX) return "header field 'shared_mem_bytes' is out of range";
  if (!(p = need("payload_bytes", h.contains("payload_bytes") && h["payload_bytes"].is_number_unsigned())).empty()) return p;
  if (!(p = need("payload_sha256", h.contains("payload_sha256") && h["payload_sha256"].is_string())).empty()) return p;
  if (!h.contains("metadata")) return "header lacks the field 'metadata'";
  return {};
}

}  // namespace

std::string serialize(const Entry& e) {
  nlohmann::json h = {
      {"key", e.key},
      {"arch", e.arch},
      {"kernel_names", e.kernel_names},
      {"shared_mem_bytes", e.shared_mem_bytes},
      {"payload_bytes", static_cast<uint64_t>(e.cubin.size())},
      {"payload_sha256", sha256_hex(e.cubin.data(), e.cubin.size())},
      {"metadata", e.metadata},
  };
  // nlohmann::json objects keep keys sorted, so the text is deterministic:
  // two writers of one kernel produce identical files.
  const std::string header = h.dump();
  if (header.size() > UINT32_MAX)
    throw Error(Status::InvalidArgument,
                fmt::format("cache entry {}: metadata of {} bytes exceeds the 4 GiB header limit", e.key, header.size()));
  std::string out;
  out.reserve(kPrefixBytes + header.size() + e.cubin.size());
  out.append(kMagic, sizeof kMagic);
  put_le<uint32_t>(out, kVersion);
  put_le<uint32_t>(out, static_cast<uint32_t>(header.size()));
  put_le<uint64_t>(out, static_cast<uint64_t>(e.cubin.size()));
  out += sha256_hex(header);
  out += header;
  out.append(e.cubin.data(), e.cubin.size());
  return out;
}

std::string parse_header(std::string_view head, uint64_t file_size, Header& out) {
  if (head.size() < kPrefixBytes)
    return fmt::format("truncated: {} bytes, shorter than the {}-byte fixed header", head.size(), kPrefixBytes);
  if (std::memcmp(head.data(), kMagic, sizeof kMagic) != 0) return "bad magic: not an attnjit cache entry";
  const auto version = get_le<uint32_t>(head, kVersionAt);
  if (version != kVersion) return fmt::format("format version {}, this build reads version {}", version, kVersion);
  out.header_bytes = get_le<uint32_t>(head, kHeaderLenAt);
  out.payload_bytes = get_le<uint64_t>(head, kPayloadLenAt);
  // Compare in a way that cannot overflow, whatever lengths a damaged file claims.
  const uint64_t after_prefix = file_size - kPrefixBytes;
  if (out.header_bytes > after_prefix || out.payload_bytes != after_prefix - out.header_bytes)
    return fmt::format("truncated or damaged: the file is {} bytes, its header promises {} + {} + {}",
                       file_size, kPrefixBytes, out.header_bytes, out.payload_bytes);
  if (head.size() < kPrefixBytes + out.header_bytes)
    return fmt::format("truncated: only {} of {} header bytes could be read", head.size() - kPrefixBytes,
                       out.header_bytes);
  const std::string_view header = head.substr(kPrefixBytes, out.header_bytes);
  if (sha256_hex(header) != head.substr(kHeaderShaAt, kShaHexBytes)) return "header SHA-256 mismatch: the header is damaged";
  out.json = nlohmann::json::parse(header.begin(), header.end(), nullptr, /*allow_exceptions=*/false);
  if (out.json.is_discarded()) return "header is not valid JSON";
  if (auto p = check_header_fields(out.json); !p.empty()) return p;
  if (out.json["payload_bytes"].get<uint64_t>() != out.payload_bytes)
    return fmt::format("payload length {} in the JSON header disagrees with {} in the fixed header",
                       out.json["payload_bytes"].get<uint64_t>(), out.payload_bytes);
  return {};
}

uint64_t header_end(std::string_view prefix) {
  if (prefix.size() < kPrefixBytes || std::memcmp(prefix.data(), kMagic, sizeof kMagic) != 0 ||
      get_le<uint32_t>(prefix, kVersionAt) != kVersion)
    return 0;
  return kPrefixBytes + get_le<uint32_t>(prefix, kHeaderLenAt);
}

std::string parse_entry(std::string_view file, const std::string& arch, const std::string& key, Entry& out) {
  Header h;
  if (auto p = parse_header(file, file.size(), h); !p.empty()) return p;
  const auto& j = h.json;
  if (j["key"] != key) return fmt::format("header key '{}' does not match the file name's key '{}'", j["key"].get<std::string>(), key);
  if (j["arch"] != arch) return fmt::format("header arch '{}' does not match the folder's arch '{}'", j["arch"].get<std::string>(), arch);
  const std::string_view payload = file.substr(kPrefixBytes + h.header_bytes);
  if (payload.size() != h.payload_bytes)
    return fmt::format("payload is {} bytes, the header says {}", payload.size(), h.payload_bytes);
  if (sha256_hex(payload) != j["payload_sha256"].get<std::string>()) return "payload SHA-256 mismatch: the cubin is damaged";

  out.key = key;
  out.arch = arch;
  out.kernel_names = j["kernel_names"].get<std::vector<std::string>>();
  out.shared_mem_bytes = j["shared_mem_bytes"].get<uint32_t>();
  out.metadata = j["metadata"];
  out.cubin.assign(payload.begin(), payload.end());
  return {};
}

}  // namespace attnjit::cache::entry_format
