// attnjit::Variant: a user variant's declaration and the values bound to it.
#include "attnjit/variant.hpp"

#include <fmt/format.h>

#include <atomic>
#include <cstring>

#include "attnjit/error.hpp"
#include "spec/user_variant.hpp"
#include "invalid_argument.hpp"

namespace attnjit {

namespace {

// The DLPack code of a param type (bits, lanes 1).
bool dl_matches(const DLDataType& d, VariantParamType t) {
  if (d.lanes != 1) return false;
  switch (t) {
    case VariantParamType::F16: return d.code == kDLFloat && d.bits == 16;
    case VariantParamType::BF16: return d.code == kDLBfloat && d.bits == 16;
    case VariantParamType::F32: return d.code == kDLFloat && d.bits == 32;
    case VariantParamType::I32: return d.code == kDLInt && d.bits == 32;
    case VariantParamType::U8: return d.code == kDLUInt && d.bits == 8;
    case VariantParamType::I64: return d.code == kDLInt && d.bits == 64;
  }
  return false;
}

std::string dl_name(const DLDataType& d) {
  const char* code = d.code == kDLFloat ? "float" : d.code == kDLBfloat ? "bfloat" : d.code == kDLInt ? "int"
                     : d.code == kDLUInt ? "uint" : "code";
  return fmt::format("{}{}{}", code, int(d.bits), d.lanes != 1 ? fmt::format("x{}", d.lanes) : "");
}

const char* kind(const VariantParam& p) { return p.rank == 0 ? "scalar" : "tensor"; }

// Versions of bound values, process-wide: a plan that kept classes for one
// variant's values never mistakes another variant's for them.
uint64_t next_values_version() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

const char* to_string(Reclassify r) noexcept { return r == Reclassify::OnBind ? "on_bind" : "each_run"; }

Reclassify parse_reclassify(std::string_view s, std::string_view arg) {
  if (s == "each_run") return Reclassify::EachRun;
  if (s == "on_bind") return Reclassify::OnBind;
  invalid(fmt::format("{}='{}' is not allowed; allowed: 'each_run', 'on_bind'", arg, s));
}

Variant::Variant(std::string score_mod, std::string mask_mod, std::vector<VariantParam> params)
    : Variant(VariantSource{std::move(score_mod), std::move(mask_mod), std::move(params)}) {}

Variant::Variant(VariantSource source) {
  validate_variant_source(source);
  source_ = std::make_shared<const VariantSource>(std::move(source));
  bound_.resize(source_->params.size());
  values_version_ = next_values_version();
}

size_t Variant::index_of(const std::string& name) const {
  const auto& ps = source_->params;
  for (size_t i = 0; i < ps.size(); ++i)
    if (ps[i].name == name) return i;
  std::string names;
  for (const auto& p : ps) names += (names.empty() ? "" : ", ") + p.name;
  invalid(fmt::format("variant param '{}' is not declared; declared: {}", name, names.empty() ? "none" : names));
}

void Variant::bind(const std::string& name, const DLTensor* t) {
  const size_t i = index_of(name);
  const VariantParam& p = source_->params[i];
  if (p.rank == 0) invalid(fmt::format("variant param '{}' is a {} scalar; bind a number, not a tensor", name, to_string(p.type)));
  if (!t) invalid(fmt::format("variant param '{}': the tensor is null", name));
  if (t->device.device_type != kDLCUDA)
    invalid(fmt::format("variant param '{}': the tensor is not in CUDA device memory (DLPack device type {})", name,
                        int(t->device.device_type)));
  if (!dl_matches(t->dtype, p.type))
    invalid(fmt::format("variant param '{}': dtype {} is not allowed; declared {}", name, dl_name(t->dtype),
                        to_string(p.type)));
  if (t->ndim != p.rank)
    invalid(fmt::format("variant param '{}': rank {} is not allowed; declared rank {}", name, t->ndim, p.rank));
  Bound b;
  b.set = true;
  b.data = static_cast<const char*>(t->data) + t->byte_offset;
  b.device = t->device.device_id;
  int64_t step = 1;
  for (int d = p.rank - 1; d >= 0; --d) {  // DLPack: null strides mean row-major
    if (t->shape[d] < 0) invalid(fmt::format("variant param '{}': shape[{}]={} is negative", name, d, t->shape[d]));
    b.shape[d] = t->shape[d];
    b.strides[d] = t->strides ? t->strides[d] : step;
    step *= t->shape[d];
  }
  bound_[i] = b;
  values_version_ = next_values_version();
}

void Variant::bind(const std::string& name, float value) {
  const size_t i = index_of(name);
  const VariantParam& p = source_->params[i];
  if (p.rank != 0 || p.type != VariantParamType::F32)
    invalid(fmt::format("variant param '{}' is declared a {} {} of rank {}; a float binds only an f32 scalar", name,
                        to_string(p.type), kind(p), p.rank));
  bound_[i] = Bound{};
  bound_[i].set = true;
  bound_[i].f32 = value;
  values_version_ = next_values_version();
}

void Variant::bind(const std::string& name, int32_t value) {
  const size_t i = index_of(name);
  const VariantParam& p = source_->params[i];
  if (p.rank != 0 || p.type != VariantParamType::I32)
    invalid(fmt::format("variant param '{}' is declared a {} {} of rank {}; an int binds only an i32 scalar", name,
                        to_string(p.type), kind(p), p.rank));
  bound_[i] = Bound{};
  bound_[i].set = true;
  bound_[i].i32 = value;
  values_version_ = next_values_version();
}

void Variant::unbind(const std::string& name) {
  bound_[index_of(name)] = Bound{};
  values_version_ = next_values_version();
}

void Variant::pack(void* out, int device) const {
  auto* bytes = static_cast<unsigned char*>(out);
  std::memset(bytes, 0, kMaxParamsBytes);
  const auto slots = variant_param_layout(*source_);
  for (size_t i = 0; i < slots.size(); ++i) {
    const VariantParam& p = source_->params[i];
    const Bound& b = bound_[i];
    if (!b.set)
      invalid(fmt::format("variant param '{}' ({} {}{}) is not bound; bind it before run()", p.name,
                          to_string(p.type), kind(p), p.rank ? fmt::format(" of rank {}", p.rank) : ""));
    if (p.rank == 0) {
      if (p.type == VariantParamType::F32) std::memcpy(bytes + slots[i].offset, &b.f32, 4);
      else std::memcpy(bytes + slots[i].offset, &b.i32, 4);
      continue;
    }
    if (b.device != device)
      invalid(fmt::format("variant param '{}' is on cuda:{}; this run is on cuda:{}", p.name, b.device, device));
    std::memcpy(bytes + slots[i].offset, &b.data, sizeof(void*));
    std::memcpy(bytes + slots[i].shape_offset, b.shape.data(), 8 * size_t(p.rank));
    std::memcpy(bytes + slots[i].stride_offset, b.strides.data(), 8 * size_t(p.rank));
  }
}

}  // namespace attnjit
