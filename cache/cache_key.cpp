#include "cache/cache_key.hpp"

#include "sha256.hpp"

namespace attnjit {

std::string make_cache_key(const KeyInputs& in) {
  Sha256 h;
  h.field("attnjit-cache-key").field(std::to_string(kCacheSchemaVersion));
  h.field(*in.source);
  // Headers in their embedded (sorted) order, name and text each.
  h.field(std::to_string(in.headers->size()));
  for (const auto& [name, text] : *in.headers) h.field(name).field(text);
  h.field(in.nvrtc_version);
  h.field(std::to_string(in.options.size()));
  for (const auto& o : in.options) h.field(o);
  h.field(in.arch).field(in.library_version);
  return h.hex();
}

}  // namespace attnjit
