#include "table_check.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <limits>

#include "attnjit/error.hpp"
#include "cuda/driver.hpp"

namespace attnjit::detail {

namespace {

using kernels::TableCheckRecord;

// The arrays each entry point names (kernels/table_check.h: TableNames).
struct Names {
  const char* pages;      // the page table
  const char* pages_v;    // V's, where K and V have tables of their own (nullptr: [b][side][i] of `pages`)
  const char* lengths;    // a block table's sequence lengths
  const char* max_length; // what bounds them
  const char* indptr;
  const char* last_page_len;
  const char* query_indptr = "cum_seq_lens_q";  // each request's query rows
  // What indptr counts: "<indptr_into> has N <indptr_unit>" (nullptr: the page table's entries).
  const char* indptr_into = nullptr;
  const char* indptr_unit = "entries";
};

Names names_of(int32_t names) {
  switch (names) {
    case kernels::kNamesDecodeWrapper:
    case kernels::kNamesDecodePlan: return {"indices", nullptr, "seq_lens", "max_seq_len", "indptr", "last_page_len"};
    case kernels::kNamesBlockTable:
      return {"k_block_table", "v_block_table", "seq_lens", "max_seq_len", "indptr", "last_page_len"};
    case kernels::kNamesTrtllm: return {"block_tables", nullptr, "seq_lens", "max_seq_len", "indptr", "last_page_len"};
    case kernels::kNamesCudnn:
      return {"block_tables", nullptr, "actual_seq_lens_kv", "max_sequence_kv", "indptr", "last_page_len"};
    case kernels::kNamesPrefill:
      return {"paged_kv_indices", nullptr, "seq_lens", "max_seq_len", "paged_kv_indptr", "paged_kv_last_page_len",
              "qo_indptr"};
    case kernels::kNamesRaggedPrefill:
      return {"page table", nullptr, "seq_lens", "max_seq_len", "kv_indptr", "last_page_len", "qo_indptr", "k", "rows"};
    case kernels::kNamesAppend:
      return {"kv_indices", nullptr, "seq_lens", "max_seq_len", "kv_indptr", "kv_last_page_len"};
    default: return {"page table", nullptr, "lengths", "the maximum length", "indptr", "last_page_len"};
  }
}

constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max();

// "name[i]", "name[b][i]" or, for one of a pair of tables in one array, "name[b][side][i]".
std::string entry(const char* name, const TableCheckRecord& r, bool with_side) {
  if (r.index1 < 0) return fmt::format("{}[{}]", name, r.index0);
  if (with_side) return fmt::format("{}[{}][{}][{}]", name, r.index0, r.side, r.index1);
  return fmt::format("{}[{}][{}]", name, r.index0, r.index1);
}

}  // namespace

std::string describe_table_fault(const TableCheckRecord& r) {
  const Names n = names_of(r.names);
  switch (r.fault) {
    case kernels::kFaultPageId: {
      // Two tables: a separate V array (v_block_table), or K's and V's rows of one array (TensorRT-LLM's [b][2][i]).
      const bool v_array = r.side == 1 && n.pages_v;
      const std::string at = entry(v_array ? n.pages_v : n.pages, r, r.side >= 0 && !n.pages_v);
      if (r.high < 0)
        return fmt::format("{}={} is not allowed: the cache has no pages", at, r.value);
      return fmt::format("{}={} is not allowed: the cache has {} pages (ids 0 to {})", at, r.value, r.high + 1,
                         r.high);
    }
    case kernels::kFaultLength:
      return fmt::format("{}={} is not allowed: allowed 0 to {}={}", entry(n.lengths, r, false), r.value,
                         n.max_length, r.high);
    case kernels::kFaultIndptr:
      if (r.high == kUnbounded)
        return fmt::format("{}={} is not allowed: allowed >= {} ({} must not decrease)", entry(n.indptr, r, false),
                           r.value, r.low, n.indptr);
      return fmt::format("{}={} is not allowed: allowed {} to {} ({} must not decrease, and {} has {} {})",
                         entry(n.indptr, r, false), r.value, r.low, r.high, n.indptr,
                         n.indptr_into ? n.indptr_into : n.pages, r.high, n.indptr_unit);
    case kernels::kFaultLastPageLen:
      return fmt::format("{}={} is not allowed: allowed 1 to page_size={}", entry(n.last_page_len, r, false), r.value,
                         r.high);
    case kernels::kFaultBatchIndex:
      return fmt::format("batch_indices[{}]={} is not allowed: allowed 0 to {} (batch_size={})", r.index0, r.value,
                         r.high, r.high + 1);
    case kernels::kFaultPosition:
      if (r.high < 0)
        return fmt::format("positions[{}]={} is not allowed: its request {} (batch_indices[{}]) has no rows",
                           r.index0, r.value, r.index1, r.index0);
      return fmt::format("positions[{}]={} is not allowed: its request {} (batch_indices[{}]) has {} rows "
                         "(positions 0 to {})",
                         r.index0, r.value, r.index1, r.index0, r.high + 1, r.high);
    case kernels::kFaultQueryIndptr:
      if (r.names == kernels::kNamesPrefill || r.names == kernels::kNamesRaggedPrefill)  // no max_q_len
        return fmt::format("{0}[{1}]={2} is not allowed: allowed {3} to {4} (request {5}'s query rows are {0}[{5}] to "
                           "{0}[{6}]: {0} must not decrease, and q has {7} rows)",
                           n.query_indptr, r.index0, r.value, r.low, r.high, r.index1, r.index1 + 1, r.high);
      return fmt::format("{0}[{1}]={2} is not allowed: allowed {3} to {4} (request {5}'s query rows start at "
                         "{0}[{5}], number at most max_q_len and end within the query's rows)",
                         n.query_indptr, r.index0, r.value, r.low, r.high, r.index1);
    case kernels::kFaultRowOffset: {
      const bool cudnn = r.names == kernels::kNamesCudnn;
      const char* array = r.side == 1 ? (cudnn ? "batch_offsets_o" : "o_row_offsets")
                                      : (cudnn ? "batch_offsets_q" : "q_row_offsets");
      return fmt::format("{}[{}]={} is not allowed: allowed 0 to {} in steps of {} (row {} with its heads inside {}, "
                         "16-byte aligned)",
                         array, r.index0, r.value, r.high, r.index1, r.index0, r.side == 1 ? "out" : "q");
    }
    default:
      return fmt::format("a device table held a value outside what is allowed (fault code {}, entry {}, value {})",
                         r.fault, r.index0, r.value);
  }
}

void raise_recorded_fault(TableCheckRecord& record, const char* when) {
  // State 2: the fields were written and fenced before it (kernels/table_check.h).
  if (__atomic_load_n(&record.state, __ATOMIC_ACQUIRE) != 2) return;
  TableCheckRecord seen;
  std::memcpy(&seen, &record, sizeof(seen));
  __atomic_store_n(&record.state, 0, __ATOMIC_RELEASE);
  throw Error(Status::InvalidArgument, fmt::format("{} (found by {})", describe_table_fault(seen), when));
}

TableCheck::~TableCheck() {
  if (host_) cuda::release_when_idle(device_, [this] { cuda::driver().MemFreeHost(host_); });
}

TableCheckRecord* TableCheck::record() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (mapped_) return mapped_;
  const auto& cu = cuda::driver();
  cuda::ScopedDevice scope(device_);
  // A first call may come while a stream captures (a one-call entry point's
  // first use inside a graph); pinned allocation is refused there unless
  // this thread's capture mode is relaxed, and nothing of it is captured.
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  ATTNJIT_CU(cu.ThreadExchangeStreamCaptureMode(&mode));
  void* host = nullptr;
  CUdeviceptr dev = 0;
  CUresult r = cu.MemAllocHost(&host, sizeof(TableCheckRecord));
  if (r == CUDA_SUCCESS) {
    std::memset(host, 0, sizeof(TableCheckRecord));
    r = cu.MemHostGetDevicePointer(&dev, host, 0);
    if (r != CUDA_SUCCESS) cu.MemFreeHost(host);
  }
  cu.ThreadExchangeStreamCaptureMode(&mode);  // back to the caller's
  ATTNJIT_CU(r);
  host_ = static_cast<TableCheckRecord*>(host);
  mapped_ = reinterpret_cast<TableCheckRecord*>(dev);
  return mapped_;
}

void TableCheck::raise_if_found(const char* when) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (host_) raise_recorded_fault(*host_, when);
}

void TableCheck::check(const char* when) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!host_) return;  // no launch ever had the record
  }
  cuda::ScopedDevice scope(device_);
  ATTNJIT_CU(cuda::driver().CtxSynchronize());
  raise_if_found(when);
}

void TableCheck::after_run(bool every_run, CUstream stream) {
  if (!every_run) return;
  const auto& cu = cuda::driver();
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  ATTNJIT_CU(cu.StreamIsCapturing(stream, &capture));
  if (capture != CU_STREAM_CAPTURE_STATUS_NONE) return;  // the launches run at replay
  ATTNJIT_CU(cu.StreamSynchronize(stream));
  raise_if_found("this call: ATTNJIT_CHECK=1");
}

}  // namespace attnjit::detail
