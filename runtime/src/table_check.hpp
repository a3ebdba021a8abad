// The host side of the device tables' checks (kernels/table_check.h): a
// record in pinned host memory that kernels write when a page id, length or
// index they read from a device table is outside what the plan allows, read
// by the host at the next call without a copy or a sync.
//
// A stateful plan owns one (in its PlanMemory, shared by a wrapper and the
// plans it makes); the one-call entry points (TensorRT-LLM's and cuDNN's
// batch decode, append_paged_kv_cache) share one per device, owned by the
// engine. Each call first raises what an earlier launch recorded, so a
// violation surfaces at the next plan()/run()/call after the launch that met
// it has completed; check() waits for the device first; ATTNJIT_CHECK=1
// waits for the call's stream after every run and raises at once.
#pragma once
#include <cuda.h>

#include <mutex>
#include <string>

#include "table_check.h"

namespace attnjit::detail {

// What a record says, as one sentence naming the array, the index, the value
// and what is allowed, e.g. "block_tables[3][7]=1234 is not allowed: the
// cache has 1000 pages (ids 0 to 999)". Pure (the CPU tests call it).
std::string describe_table_fault(const kernels::TableCheckRecord& record);

// If `record` holds a written fault (state 2), clears it (state 0) and throws
// Error(InvalidArgument): its description and "(found by <when>)". A record
// a kernel is still writing (state 1), or none, throws nothing.
void raise_recorded_fault(kernels::TableCheckRecord& record, const char* when);

class TableCheck {
 public:
  explicit TableCheck(int device) : device_(device) {}
  ~TableCheck();
  TableCheck(const TableCheck&) = delete;
  TableCheck& operator=(const TableCheck&) = delete;

  // The record's address for a launch (the same on host and device under
  // unified addressing), allocated at the first use and never moved, so a
  // captured graph keeps writing where the host reads. Allowed while a stream
  // captures: the allocation runs in relaxed capture mode.
  kernels::TableCheckRecord* record();

  // If a kernel recorded a fault, clears the record and throws
  // Error(InvalidArgument) with its description and "(found by <when>)".
  // No sync: a launch still running reports at a later call.
  void raise_if_found(const char* when);
  // Waits for every stream of the device, then raise_if_found(when).
  void check(const char* when);
  // ATTNJIT_CHECK=1 (every_run): waits for `stream`, then raises what the
  // call's launches found. Nothing while `stream` captures a graph.
  void after_run(bool every_run, CUstream stream);

 private:
  int device_;
  std::mutex mutex_;
  kernels::TableCheckRecord* host_ = nullptr;  // pinned
  kernels::TableCheckRecord* mapped_ = nullptr;  // the same record as the device addresses it
};

}  // namespace attnjit::detail
