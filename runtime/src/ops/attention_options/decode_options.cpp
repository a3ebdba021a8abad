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

std::set<std::string> decode_problem_keys(std::initializer_list<const char*> own) {
  std::set<std::string> keys = decode_option_keys();
  keys.insert(own.begin(), own.end());
  return keys;
}

}  // namespace attnjit::ops
