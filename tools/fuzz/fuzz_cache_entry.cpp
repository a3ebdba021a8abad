// libFuzzer target: the cache-entry parser (cache/entry_format.cpp), which
// reads files any process (or a bad disk) may have written. A crafted entry
// must never crash it, and must never load unless it is a sound entry for the
// key and arch asked for.
//
// The header is protected by a SHA-256 that random bytes never match, which
// would stop the fuzzer at the first check. So inputs whose first byte is odd
// get their header hash recomputed before parsing, letting the fuzzer reach
// the JSON field checks, the length checks and the payload hash behind it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "cache/entry_format.hpp"
#include "sha256.hpp"

namespace ef = attnjit::cache::entry_format;

namespace {

const std::string kKey(64, 'a');  // the seed corpus's entries use this key and arch
const std::string kArch = "sm_90a";

[[noreturn]] void property_failed(const char* what) {
  __builtin_fprintf(stderr, "fuzz_cache_entry: property violated: %s\n", what);
  std::abort();
}

void fix_header_hash(std::string& file) {
  if (file.size() < ef::kPrefixBytes) return;
  const uint64_t end = ef::header_end(file);
  if (end == 0 || end > file.size()) return;
  const std::string sum = attnjit::sha256_hex(std::string_view(file).substr(ef::kPrefixBytes, end - ef::kPrefixBytes));
  file.replace(24, 64, sum);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string file(reinterpret_cast<const char*>(data), size);
  if (size > 0 && (data[0] & 1)) fix_header_hash(file);

  ef::Header header;
  const std::string header_problem = ef::parse_header(file, file.size(), header);
  // A short head (what `cache ls` reads) must never be taken for more than it is.
  ef::Header head_only;
  (void)ef::parse_header(std::string_view(file).substr(0, std::min<size_t>(file.size(), ef::kPrefixBytes)),
                         file.size(), head_only);

  attnjit::cache::Entry entry;
  const std::string problem = ef::parse_entry(file, kArch, kKey, entry);
  if (problem.empty()) {
    // Loaded: it must be exactly what serialize() writes for that entry, with
    // the key and arch that were asked for.
    if (!header_problem.empty()) property_failed("parse_entry accepted what parse_header refused");
    if (entry.key != kKey || entry.arch != kArch) property_failed("loaded an entry for another key or arch");
    attnjit::cache::Entry again;
    if (!ef::parse_entry(ef::serialize(entry), kArch, kKey, again).empty() || again.cubin != entry.cubin ||
        again.metadata != entry.metadata || again.kernel_names != entry.kernel_names)
      property_failed("a loaded entry does not survive serialize + parse");
  } else if (!entry.key.empty() || !entry.cubin.empty()) {
    property_failed("a refused entry filled the output");
  }
  return 0;
}
