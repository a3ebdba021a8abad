// The archive's manifest, its comparison with the unpacking machine, and the
// file-name -> compression rule.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "attnjit/error.hpp"
#include "cache/archive.hpp"

namespace attnjit::cache::archive {

namespace {

constexpr const char* kFormatName = "attnjit-cache-archive";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

nlohmann::json Manifest::to_json() const {
  return {{"format", kFormatName},
          {"format_version", format_version},
          {"packed_by", packed_by},
          {"created", created},
          {"entries", entries},
          {"bytes", bytes},
          {"archs", archs},
          {"nvrtc_versions", nvrtc_versions},
          {"attnjit_versions", attnjit_versions}};
}

std::string Manifest::from_json(const nlohmann::json& j, Manifest& out) {
  if (!j.is_object() || j.value("format", "") != kFormatName)
    return fmt::format("its manifest does not say \"format\": \"{}\"", kFormatName);
  try {
    out.format_version = j.at("format_version").get<int>();
    if (out.format_version != kFormatVersion)
      return fmt::format("its format_version is {}; this attnjit reads {}", out.format_version, kFormatVersion);
    out.packed_by = j.value("packed_by", "");
    out.created = j.value("created", "");
    out.entries = j.value("entries", size_t{0});
    out.bytes = j.value("bytes", uint64_t{0});
    out.archs = j.value("archs", std::vector<std::string>{});
    out.nvrtc_versions = j.value("nvrtc_versions", std::vector<std::string>{});
    out.attnjit_versions = j.value("attnjit_versions", std::vector<std::string>{});
  } catch (const nlohmann::json::exception& e) {
    return fmt::format("its manifest has a malformed field ({})", e.what());
  }
  return {};
}

std::vector<std::string> compare(const Manifest& m, const LocalVersions& local) {
  std::vector<std::string> out;
  // Both versions are part of every cache key: an entry built by another
  // attnjit or NVRTC is never looked up here, it only takes space.
  for (const auto& v : m.attnjit_versions)
    if (!local.attnjit.empty() && v != local.attnjit)
      out.push_back(fmt::format("the archive holds entries built by attnjit {}, this is attnjit {}: "
                                "their keys differ, so this attnjit will not use them", v, local.attnjit));
  for (const auto& v : m.nvrtc_versions)
    if (!local.nvrtc.empty() && v != local.nvrtc)
      out.push_back(fmt::format("the archive holds entries compiled with NVRTC {}, this machine has NVRTC {}: "
                                "their keys differ, so this attnjit will not use them", v, local.nvrtc));
  if (!local.archs.empty()) {
    std::vector<std::string> foreign;
    for (const auto& a : m.archs)
      if (!contains(local.archs, a)) foreign.push_back(a);
    if (!foreign.empty())
      out.push_back(fmt::format("the archive holds entries for {}, this machine's GPUs are {}: "
                                "those entries will not be used here", fmt::join(foreign, ", "),
                                fmt::join(local.archs, ", ")));
  }
  return out;
}

Compression compression_for(const std::filesystem::path& path, const char* arg) {
  const std::string name = path.filename().string();
  if (ends_with(name, ".tar.zst") || ends_with(name, ".tzst")) return Compression::Zstd;
  if (ends_with(name, ".tar.gz") || ends_with(name, ".tgz")) return Compression::Gzip;
  if (ends_with(name, ".tar")) return Compression::None;
  throw Error(Status::InvalidArgument,
              fmt::format("{}='{}' has no archive ending; allowed: .tar.zst (or .tzst), .tar.gz (or .tgz), .tar",
                          arg, path.string()));
}

}  // namespace attnjit::cache::archive
