// The plan the engine keeps for a problem of a one-call entry point (single
// decode, the block-table batch decodes): made on the first call with that
// key, shared by every later one.
#pragma once
#include <memory>
#include <string>

#include "attnjit/runtime.hpp"
#include "engine.hpp"

namespace attnjit::ops {

// key: the problem's JSON form (it holds every field the plan depends on).
template <class Plan, class Problem>
std::shared_ptr<const Plan> memoized_plan(const Runtime& rt, const std::string& key, const Problem& problem) {
  auto& engine = rt.engine();
  auto plan = std::static_pointer_cast<const Plan>(engine.find_plan(key));
  if (!plan) {
    plan = std::make_shared<const Plan>(rt, problem);
    engine.remember_plan(key, plan);
  }
  return plan;
}

}  // namespace attnjit::ops
