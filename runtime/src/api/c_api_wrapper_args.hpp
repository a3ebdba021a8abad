// Argument checks the batch wrappers' C entry points (attnjit_batch_decode.h,
// attnjit_batch_prefill.h) share, each worded once.
#pragma once
#include <cstddef>
#include <initializer_list>
#include <utility>

#include "attnjit/attnjit.h"

namespace attnjit::capi {

// A wrapper's create: the runtime and the place for the new handle.
void require_create_args(const char* fn, const attnjit_runtime_t* rt, attnjit_plan_t* const* out);

// Outside CUDA-graph mode no fixed buffer may be given: refuses the first of
// `buffers` (tensor, argument name) that is, naming `graph_flag` as it is spelt.
void refuse_graph_buffers(std::initializer_list<std::pair<const DLTensor*, const char*>> buffers,
                          const char* graph_flag);

// A workspace query's two places for the bytes it reports.
void require_workspace_outputs(const char* fn, const size_t* float_workspace_bytes, const size_t* int_workspace_bytes);

}  // namespace attnjit::capi
