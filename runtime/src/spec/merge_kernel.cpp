#include "spec/merge_kernel.hpp"

#include <fmt/format.h>

#include "attnjit/error.hpp"
#include "spec/json_fields.hpp"
#include "spec/variant_spec.hpp"

namespace attnjit {

std::string MergeKernel::name() const {
  const std::string in = in_dtype == DType::F32 ? "" : std::string("_in_") + device_type(in_dtype);
  return fmt::format("merge_states_d{}_{}_w{}{}", head_dim, device_type(o_dtype), warps, in);
}

nlohmann::json MergeKernel::to_json() const {
  nlohmann::json j = {{"family", kFamily}, {"head_dim", head_dim}, {"o_dtype", to_string(o_dtype)}, {"warps", warps}};
  if (in_dtype != DType::F32) j["in_dtype"] = to_string(in_dtype);  // f32 partials keep their old identity
  return j;
}

MergeKernel MergeKernel::from_json(const nlohmann::json& j) {
  MergeKernel s;
  s.head_dim = spec_json::int_field(j, "head_dim");
  s.o_dtype = parse_dtype(spec_json::string_field(j, "o_dtype"), "spec.o_dtype");
  s.warps = spec_json::int_field(j, "warps", 4);
  s.in_dtype = parse_dtype(spec_json::string_field(j, "in_dtype", "float32"), "spec.in_dtype");
  s.validate();
  return s;
}

std::vector<std::pair<std::string, std::string>> MergeKernel::template_values() const {
  return {{"HEAD_DIM", std::to_string(head_dim)},
          {"O_TYPE", device_type(o_dtype)},
          {"WARPS", std::to_string(warps)},
          {"IN_TYPE", device_type(in_dtype)}};
}

void MergeKernel::validate() const {
  if (head_dim != 64 && head_dim != 128 && head_dim != 256 && head_dim != 512)
    throw Error(Status::InvalidArgument,
                fmt::format("merge_states spec.head_dim={} is not supported; allowed: 64, 128, 256, 512", head_dim));
  if (o_dtype != DType::F16 && o_dtype != DType::BF16)
    throw Error(Status::InvalidArgument, fmt::format("merge_states spec.o_dtype={} is not supported; allowed: float16, "
                                                     "bfloat16",
                                                     to_string(o_dtype)));
  if (in_dtype != DType::F32 && in_dtype != DType::F16 && in_dtype != DType::BF16)
    throw Error(Status::InvalidArgument, fmt::format("merge_states spec.in_dtype={} is not supported; allowed: "
                                                     "float32, float16, bfloat16",
                                                     to_string(in_dtype)));
  if (warps < 1 || warps > 8)
    throw Error(Status::InvalidArgument,
                fmt::format("merge_states spec.warps={} is not supported; allowed: 1 to 8", warps));
}

}  // namespace attnjit
