#include "ops/attention_options/decode_options.hpp"

namespace attnjit::ops {

const std::set<std::string>& decode_option_keys() {
  static const std::set<std::string> keys = [] {
    std::set<std::string> k = attention_option_keys();
    k.insert({"use_tensor_cores", "q_scale"});
    return k;
  }();
  return keys;
}

}  // namespace attnjit::ops
