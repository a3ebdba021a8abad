#include "spec/user_variant.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>

#include "attnjit/error.hpp"
#include "enum_names.hpp"
#include "sha256.hpp"
#include "block_mask_params.h"
#include "variant_params.h"
#include "invalid_argument.hpp"

namespace attnjit {

static_assert(Variant::kMaxParamsBytes == kernels::kUserParamsWords * 8, "the public limit is the kernels' blob");

const char* to_string(VariantParamType t) noexcept {
  static constexpr EnumName<VariantParamType> kNames[] = {
      {VariantParamType::F16, "f16"}, {VariantParamType::BF16, "bf16"}, {VariantParamType::F32, "f32"},
      {VariantParamType::I32, "i32"}, {VariantParamType::U8, "u8"}, {VariantParamType::I64, "i64"}};
  return name_in(kNames, t);
}

VariantParamType parse_variant_param_type(std::string_view s, std::string_view arg) {
  for (auto t : {VariantParamType::F16, VariantParamType::BF16, VariantParamType::F32, VariantParamType::I32,
                 VariantParamType::U8, VariantParamType::I64})
    if (s == to_string(t)) return t;
  throw Error(Status::InvalidArgument,
              fmt::format("{}='{}' is not a param type; allowed: f16, bf16, f32, i32, u8, i64", arg, s));
}

namespace {

bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

// Names the generated code or C++ itself already uses.
bool reserved(const std::string& s) {
  static const std::set<std::string> words = {
      "s", "b", "h", "q", "kv", "p", "Params", "score_mod", "mask_mod", "int", "float", "double", "bool", "char",
      "void", "const", "return", "if", "else", "for", "while", "do", "auto", "long", "short", "unsigned", "signed",
      "struct", "class", "template", "typename", "namespace", "static", "true", "false", "this", "sizeof", "new",
      "delete", "switch", "case", "default", "break", "continue", "operator", "using"};
  return words.count(s) > 0 || s.rfind("__", 0) == 0;
}

const char* element_type(VariantParamType t) {
  switch (t) {
    case VariantParamType::F16: return "attnjit::user::f16_value";
    case VariantParamType::BF16: return "attnjit::user::bf16_value";
    case VariantParamType::F32: return "float";
    case VariantParamType::I32: return "int32_t";
    case VariantParamType::U8: return "uint8_t";
    case VariantParamType::I64: return "int64_t";
  }
  return "?";
}

size_t count_lines(const std::string& s) { return size_t(std::count(s.begin(), s.end(), '\n')); }

}  // namespace

std::vector<VariantParamSlot> variant_param_layout(const VariantSource& s, size_t* total_bytes) {
  std::vector<VariantParamSlot> slots;
  size_t at = 0;
  for (const auto& p : s.params) {
    VariantParamSlot slot;
    if (p.rank == 0) {
      slot.offset = at;
      at += 4;
    } else {
      at = (at + 7) / 8 * 8;
      slot.offset = at;
      slot.shape_offset = at + 8;
      slot.stride_offset = at + 8 + 8 * size_t(p.rank);
      at = slot.stride_offset + 8 * size_t(p.rank);
    }
    slots.push_back(slot);
  }
  if (total_bytes) *total_bytes = (at + 7) / 8 * 8;
  return slots;
}

void validate_variant_source(const VariantSource& s) {
  if (s.score_mod.empty() && s.mask_mod.empty())
    invalid("variant: score_mod and mask_mod are both empty; give at least one (the body of the device function)");
  if (s.block_sparse && s.mask_mod.empty())
    invalid("variant: block_sparse=true needs a mask_mod (the classes are mask_mod's); allowed without one: false");
  if (!s.heads_vary && !s.block_sparse)
    invalid("variant: heads_vary=false is a promise about the block mask; allowed without block_sparse: true");
  if (s.reclassify == Reclassify::OnBind && !s.block_sparse)
    invalid("variant: reclassify='on_bind' is about keeping the block mask; allowed without block_sparse: "
            "'each_run'");
  std::set<std::string> members;
  for (size_t i = 0; i < s.params.size(); ++i) {
    const auto& p = s.params[i];
    if (!is_identifier(p.name) || reserved(p.name))
      invalid(fmt::format("variant params[{}].name='{}' is not allowed; expected a C identifier that is not a keyword, "
                          "starts with no '__' and is none of s, b, h, q, kv, p, Params, score_mod, mask_mod",
                          i, p.name));
    if (p.rank < 0 || p.rank > 4)
      invalid(fmt::format("variant param '{}': rank={} is not allowed; 0 (a scalar) or 1..4 (a tensor)", p.name, p.rank));
    if (p.rank == 0 && p.type != VariantParamType::F32 && p.type != VariantParamType::I32)
      invalid(fmt::format("variant param '{}': a scalar of type {} is not allowed; scalars are f32 or i32", p.name,
                          to_string(p.type)));
    const std::vector<std::string> names =
        p.rank == 0 ? std::vector<std::string>{p.name}
                    : std::vector<std::string>{p.name, p.name + "_shape", p.name + "_stride", p.name + "_at"};
    for (const auto& n : names)
      if (!members.insert(n).second)
        invalid(fmt::format("variant param '{}': the member '{}' is declared twice (a repeated name, or one that "
                            "collides with another tensor's _shape / _stride / _at)",
                            p.name, n));
  }
  size_t bytes = 0;
  variant_param_layout(s, &bytes);
  // A block-sparse variant's kernels find their tile classes in the blob's tail (block_mask_params.h).
  const size_t most = Variant::kMaxParamsBytes - (s.block_sparse ? sizeof(kernels::BlockTiles) : 0);
  if (bytes > most)
    invalid(fmt::format("variant params take {} bytes; at most {} fit in the kernel's parameters{} (a tensor of rank "
                        "R takes 8 + 16 R bytes, a scalar 4)",
                        bytes, most, s.block_sparse ? " with block_sparse=true" : ""));
}

nlohmann::json variant_source_json(const VariantSource& s) {
  nlohmann::json params = nlohmann::json::array();
  for (const auto& p : s.params) params.push_back({{"name", p.name}, {"type", to_string(p.type)}, {"rank", p.rank}});
  nlohmann::json j = {{"score_mod", s.score_mod}, {"mask_mod", s.mask_mod}, {"params", params}};
  // Absent when off, so variants without block sparsity keep their JSON (and kernels).
  if (s.block_sparse) j["block_sparse"] = true;
  if (!s.heads_vary) j["heads_vary"] = false;
  // reclassify is left out: a run-time policy, not part of what is compiled (variant.hpp).
  return j;
}

VariantSource variant_source_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) invalid(fmt::format("{}={} is not allowed; expected an object", where, j.dump()));
  static const std::set<std::string> keys = {"score_mod",  "mask_mod",   "params",
                                             "block_sparse", "heads_vary", "reclassify"};
  for (const auto& [k, v] : j.items())
    if (!keys.count(k))
      invalid(fmt::format("{}.{} is not a field; allowed: score_mod, mask_mod, params, block_sparse, heads_vary, "
                          "reclassify",
                          where, k));
  VariantSource s;
  auto text = [&](const char* key) -> std::string {
    if (!j.contains(key) || j.at(key).is_null()) return "";
    if (!j.at(key).is_string())
      invalid(fmt::format("{}.{}={} is not allowed; expected a string", where, key, j.at(key).dump()));
    return j.at(key).get<std::string>();
  };
  s.score_mod = text("score_mod");
  s.mask_mod = text("mask_mod");
  auto flag = [&](const char* key, bool fallback) {
    if (!j.contains(key) || j.at(key).is_null()) return fallback;
    if (!j.at(key).is_boolean())
      invalid(fmt::format("{}.{}={} is not allowed; expected true or false", where, key, j.at(key).dump()));
    return j.at(key).get<bool>();
  };
  s.block_sparse = flag("block_sparse", false);
  s.heads_vary = flag("heads_vary", true);
  if (j.contains("reclassify") && !j.at("reclassify").is_null()) {
    if (!j.at("reclassify").is_string())
      invalid(fmt::format("{}.reclassify={} is not allowed; allowed: 'each_run', 'on_bind'", where,
                          j.at("reclassify").dump()));
    s.reclassify = parse_reclassify(j.at("reclassify").get<std::string>(), where + ".reclassify");
  }
  if (j.contains("params")) {
    const auto& ps = j.at("params");
    if (!ps.is_array()) invalid(fmt::format("{}.params={} is not allowed; expected an array", where, ps.dump()));
    for (size_t i = 0; i < ps.size(); ++i) {
      const auto& e = ps[i];
      const std::string at = fmt::format("{}.params[{}]", where, i);
      if (!e.is_object() || !e.contains("name") || !e.at("name").is_string() || !e.contains("type") ||
          !e.at("type").is_string())
        invalid(fmt::format("{}={} is not allowed; expected {{\"name\": str, \"type\": str, \"rank\": int}}", at,
                            e.dump()));
      VariantParam p;
      p.name = e.at("name").get<std::string>();
      p.type = parse_variant_param_type(e.at("type").get<std::string>(), at + ".type");
      if (e.contains("rank")) {
        if (!e.at("rank").is_number_integer())
          invalid(fmt::format("{}.rank={} is not allowed; expected an integer 0..4", at, e.at("rank").dump()));
        p.rank = e.at("rank").get<int>();
      }
      s.params.push_back(p);
    }
  }
  validate_variant_source(s);
  return s;
}

std::string variant_source_digest(const VariantSource& s) {
  return sha256_hex(variant_source_json(s).dump()).substr(0, 12);
}

std::string variant_device_code(const VariantSource& s, const std::string& tu_name) {
  std::ostringstream o;
  size_t bytes = 0;
  const auto slots = variant_param_layout(s, &bytes);
  o << "// attnjit user variant " << variant_source_digest(s) << "\n";
  if (!s.score_mod.empty()) o << "#define ATTNJIT_USER_SCORE_MOD 1\n";
  if (!s.mask_mod.empty()) o << "#define ATTNJIT_USER_MASK_MOD 1\n";
  if (s.block_sparse) o << "#define ATTNJIT_USER_BLOCK_SPARSE 1\n";
  o << "#include \"user_variant.cuh\"\n"
    << "namespace attnjit {\nnamespace user {\n"
    << "struct Params {\n";
  for (const auto& p : s.params) {
    if (p.rank == 0) {
      o << "  " << (p.type == VariantParamType::F32 ? "float " : "int32_t ") << p.name << ";\n";
      continue;
    }
    const char* t = element_type(p.type);
    o << "  const " << t << "* " << p.name << ";\n"
      << "  int64_t " << p.name << "_shape[" << p.rank << "];\n"
      << "  int64_t " << p.name << "_stride[" << p.rank << "];\n"
      << "  ATTNJIT_DEVICE " << t << " " << p.name << "_at(";
    for (int d = 0; d < p.rank; ++d) o << (d ? ", " : "") << "int64_t i" << d;
    o << ") const { return " << p.name << "[";
    for (int d = 0; d < p.rank; ++d) o << (d ? " + " : "") << "i" << d << " * " << p.name << "_stride[" << d << "]";
    o << "]; }\n";
  }
  if (s.params.empty()) o << "  int32_t unused_;\n";  // a struct with no members would still be 1 byte
  o << "};\n";
  // The host packs by variant_param_layout (natural alignment, declaration order): the size checks it.
  bool any_tensor = false;
  for (const auto& p : s.params) any_tensor = any_tensor || p.rank > 0;
  size_t natural = 0;
  if (!s.params.empty()) {
    const auto& last = s.params.back();
    natural = last.rank ? slots.back().stride_offset + 8 * size_t(last.rank) : slots.back().offset + 4;
  } else {
    natural = 4;
  }
  natural = any_tensor ? (natural + 7) / 8 * 8 : natural;
  o << "static_assert(sizeof(Params) == " << natural << ", \"Params differ from the host's layout\");\n";
  auto snippet = [&](const char* signature, const char* name, const std::string& body) {
    o << signature << " {\n#line 1 \"" << name << "\"\n" << body << "\n";
    const std::string so_far = o.str();
    o << "#line " << count_lines(so_far) + 2 << " \"" << tu_name << "\"\n}\n";
  };
  if (!s.score_mod.empty())
    snippet("ATTNJIT_DEVICE float score_mod(float s, int b, int h, int q, int kv, const Params& p)", "score_mod",
            s.score_mod);
  if (!s.mask_mod.empty())
    snippet("ATTNJIT_DEVICE bool mask_mod(int b, int h, int q, int kv, const Params& p)", "mask_mod", s.mask_mod);
  o << "}  // namespace user\n}  // namespace attnjit\n";
  const std::string text = o.str();
  return text + "#line " + std::to_string(count_lines(text) + 2) + " \"" + tu_name + "\"\n";
}

bool snippet_compile_error(const std::string& message, std::string* mapped) {
  std::istringstream in(message);
  std::string line, out;
  bool inside = false;  // within a snippet message's context lines (source line, caret)
  int found = 0;
  while (std::getline(in, line)) {
    size_t name_len = 0;
    if (line.rfind("score_mod(", 0) == 0) name_len = 9;
    if (line.rfind("mask_mod(", 0) == 0) name_len = 8;
    const size_t close = name_len ? line.find("):", name_len) : std::string::npos;
    if (close != std::string::npos) {
      out += fmt::format("{} line {}:{}\n", line.substr(0, name_len), line.substr(name_len + 1, close - name_len - 1),
                         line.substr(close + 2));
      inside = true;
      ++found;
      continue;
    }
    // A header line of another file ends a snippet message's context.
    if (line.empty() || line.find("): ") != std::string::npos) inside = false;
    if (inside) out += line + "\n";
  }
  if (!found) return false;
  *mapped = "variant snippet does not compile (NVRTC):\n" + out;
  return true;
}

}  // namespace attnjit
