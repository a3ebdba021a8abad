#include "attnjit/cache_config.hpp"

#include <fmt/format.h>

#include <cctype>
#include <cstdint>
#include <string>

#include "attnjit/error.hpp"
#include "enum_names.hpp"

namespace attnjit {

const char* to_string(CacheMode m) noexcept {
  static constexpr EnumName<CacheMode> kNames[] = {
      {CacheMode::ReadWrite, "readwrite"}, {CacheMode::ReadOnly, "readonly"}, {CacheMode::Off, "off"},
      {CacheMode::Require, "require"}};
  return name_in(kNames, m);
}

CacheMode parse_cache_mode(std::string_view s, std::string_view arg) {
  if (s == "readwrite" || s == "rw") return CacheMode::ReadWrite;
  if (s == "readonly" || s == "ro") return CacheMode::ReadOnly;
  if (s == "off") return CacheMode::Off;
  if (s == "require") return CacheMode::Require;
  throw Error(Status::InvalidArgument,
              fmt::format("{}='{}' is not a cache mode; allowed: readwrite, readonly, off, require", arg, s));
}

uint64_t parse_byte_count(std::string_view text, std::string_view arg) {
  auto bad = [&](const std::string& why) {
    return Error(Status::InvalidArgument,
                 fmt::format("{}='{}' is not a byte count ({}); allowed: a whole number of bytes from 1 to {}, or a "
                             "number with a K, M, G or T suffix (powers of 1024, rounded down to whole bytes), e.g. "
                             "4294967296, 512M, 4G or 1.5GiB",
                             arg, text, why, UINT64_MAX));
  };
  // 128-bit arithmetic, so that every value past 2^64 - 1 is seen, never wrapped.
  using Wide = unsigned __int128;
  const Wide kMax = UINT64_MAX;
  const auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
  size_t i = 0;
  Wide whole = 0;
  for (; i < text.size() && is_digit(text[i]); ++i) {
    whole = whole * 10 + static_cast<unsigned>(text[i] - '0');
    if (whole > kMax) throw bad("more than 2^64 - 1 bytes");
  }
  const bool has_whole = i > 0;
  // The fraction's first 18 digits count (far below a byte at any suffix); later ones are dropped.
  uint64_t frac = 0, frac_scale = 1;
  bool has_frac = false;
  if (i < text.size() && text[i] == '.') {
    for (++i; i < text.size() && is_digit(text[i]); ++i, has_frac = true)
      if (frac_scale < 1000000000000000000ull) frac = frac * 10 + static_cast<unsigned>(text[i] - '0'), frac_scale *= 10;
  }
  if (!has_whole && !has_frac) {
    if (text.empty()) throw bad("it is empty");
    const char c = text[0];
    if (c == '-' || c == '+') throw bad("a sign is not allowed");
    if (std::isspace(static_cast<unsigned char>(c))) throw bad("spaces are not allowed");
    throw bad("it does not start with a digit");
  }
  std::string suffix(text.substr(i));
  for (auto& ch : suffix) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  static const std::pair<const char*, int> kUnits[] = {{"", 0},   {"B", 0},   {"K", 1},   {"KB", 1},  {"KIB", 1},
                                                       {"M", 2},  {"MB", 2},  {"MIB", 2}, {"G", 3},   {"GB", 3},
                                                       {"GIB", 3}, {"T", 4},  {"TB", 4},  {"TIB", 4}};
  int power = -1;
  for (const auto& [name, p] : kUnits)
    if (suffix == name) power = p;
  if (power < 0) throw bad(fmt::format("'{}' is not a suffix", text.substr(i)));
  if (power == 0 && frac != 0) throw bad("a fraction of a byte");
  const Wide unit = Wide(1) << (10 * power);
  const Wide bytes = whole * unit + Wide(frac) * unit / frac_scale;  // whole <= 2^64, unit <= 2^40: no overflow
  if (bytes > kMax) throw bad("more than 2^64 - 1 bytes");
  if (bytes == 0) throw bad("zero: the cache would keep nothing");
  return static_cast<uint64_t>(bytes);
}

}  // namespace attnjit
