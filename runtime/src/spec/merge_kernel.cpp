#include "spec/merge_kernel.hpp"

#include <fmt/format.h>

#include "attnjit/error.hpp"
#include "spec/json_fields.hpp"
#include "spec/variant_spec.hpp"

namespace attnjit {

std::string MergeKernel::name() const {
  return fmt::format("merge_states_d{}_{}_w{}", head_dim, device_type(o_dtype), warps);
}

nlohmann::json MergeKernel::to_json() const {
  return {{"family", kFamily}, {"head_dim", head_dim}, {"o_dtype", to_string(o_dtype)}, {"warps", warps}};
}

MergeKernel MergeKernel::from_json(const nlohmann::json& j) {
  MergeKernel s;
  s.head_dim = spec_json::int_field(j, "head_dim");
  s.o_dtype = parse_dtype(spec_json::string_field(j, "o_dtype"), "spec.o_dtype");
  s.warps = spec_json::int_field(j, "warps", 4);
  s.validate();
  return s;
}

std::vector<std::pair<std::string, std::string>> MergeKernel::template_values() const {
  return {{"HEAD_DIM", std::to_string(head_dim)}, {"O_TYPE", device_type(o_dtype)}, {"WARPS", std::to_string(warps)}};
}

void MergeKernel::validate() const {
  if (head_dim != 64 && head_dim != 128 && head_dim != 256)
    throw Error(Status::InvalidArgument,
                fmt::format("merge_states spec.head_dim={} is not supported; allowed: 64, 128, 256", head_dim));
  if (o_dtype != DType::F16 && o_dtype != DType::BF16)
    throw Error(Status::InvalidArgument, fmt::format("merge_states spec.o_dtype={} is not supported; allowed: float16, "
                                                     "bfloat16",
                                                     to_string(o_dtype)));
  if (warps < 1 || warps > 8)
    throw Error(Status::InvalidArgument,
                fmt::format("merge_states spec.warps={} is not supported; allowed: 1 to 8", warps));
}

}  // namespace attnjit
