// The C API's opaque handles and the helpers every attnjit_<op>_* function
// uses on them. One header so each operator's C functions can live in a file
// of their own (c_api.cpp, c_api_batch_decode.cpp).
#pragma once
#include <fmt/format.h>

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "api/c_api_guard.hpp"
#include "attnjit/attnjit.h"
#include "attnjit/error.hpp"
#include "attnjit/runtime.hpp"
#include "attnjit/tensor.hpp"

struct attnjit_runtime {
  attnjit::Runtime runtime;
};
// One handle type for every operator's plan: the operator's name, the C++
// object behind a type-erased pointer, and what the generic functions report.
// A stateful plan (the batch decode wrapper) refreshes workspace_bytes and
// description after each of its plan() calls.
struct attnjit_plan {
  const char* op;  // a static string: the registry's operator name
  std::shared_ptr<void> plan;
  size_t workspace_bytes;
  std::string description;
  // Stateful plans (the wrappers) only: their plan memory and scratch
  // (attnjit_plan_set_int_workspace and friends); empty for the others.
  struct Memory {
    std::function<void(void*, size_t)> use_int_workspace;
    std::function<size_t()> int_workspace_bytes;
    std::function<void(void*, size_t)> use_float_workspace;
    // Waits for the device and raises a bad device-table entry a run met
    // (attnjit_plan_check); empty for plans whose kernels read no tables.
    std::function<void()> check_tables;
  } memory;
};

namespace attnjit::capi {

inline constexpr const char* kRuntimeHandle = "an attnjit_runtime_t* from attnjit_runtime_create";
inline constexpr const char* kPlanHandle = "an attnjit_plan_t* from an attnjit_<op>_plan function";

template <class Plan>
attnjit_plan_t* wrap_plan(const char* op, Plan&& plan) {
  auto p = std::make_shared<std::decay_t<Plan>>(std::forward<Plan>(plan));
  return new attnjit_plan_t{op, p, p->workspace_bytes(), p->describe(), {}};  // no plan memory
}

// The C++ object behind a handle, after checking it was made for `op`.
template <class Plan>
Plan& plan_as_mutable(const attnjit_plan_t* plan, const char* op, const char* function) {
  require_non_null(plan, function, "plan", kPlanHandle);
  if (std::string_view(plan->op) != op)
    throw Error(Status::InvalidArgument,
                fmt::format("{}: plan is a {} plan; allowed: a {} plan from attnjit_{}_plan", function, plan->op, op,
                            op));
  return *static_cast<Plan*>(plan->plan.get());
}
template <class Plan>
const Plan& plan_as(const attnjit_plan_t* plan, const char* op, const char* function) {
  return plan_as_mutable<Plan>(plan, op, function);
}

inline void require_flag(int value, const char* function, const char* param) {
  if (value != 0 && value != 1)
    throw Error(Status::InvalidArgument, fmt::format("{}: {}={} is not a flag; allowed: 0, 1", function, param, value));
}

inline Stream as_stream(void* stream) { return static_cast<Stream>(stream); }

}  // namespace attnjit::capi
