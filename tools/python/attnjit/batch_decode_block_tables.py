"""TensorRT-LLM's and cuDNN's batch decode (block tables + device lengths) with FlashInfer 0.7.2's signatures,
over the C API (attnjit_batch_decode.h).

TensorRT-LLM's goes through attnjit_trtllm_batch_decode_with_kv_cache_v3
(sinks, enable_pdl, speculative decoding's query lengths, device-tensor
scales, lse), or _v4 for a draft-tree mask. cuDNN's goes through attnjit_cudnn_batch_decode_with_kv_cache_v2
(the ragged batch offsets of q and out), or, when it asks for what only the
TensorRT-LLM entry point computes (lse, several query tokens per request, a
window, sinks) and passes no batch offsets, through that one: both read the
same block table and device lengths.

Both are one call: the library memoizes the plan per problem and splits
every request the same way (the lengths stay on the device), so a call is
graph-capturable. Index arrays must already have FlashInfer's types (int32;
uint32 where its kernels take it): other dtypes are refused by name. A
FlashInfer argument attnjit cannot honour is refused as UNSUPPORTED naming
it, never ignored.
"""

import ctypes

from . import _args as checks
from . import _ctypes_types as c_types
from . import _runtime
from ._dlpack import Borrowed, require_torch
from ._library import check, has, lib
from ._runtime import check_tables  # noqa: F401 (these entry points' bad device tables: see there)
from ._streams import current_stream
from .errors import invalid_argument

_SINK_DTYPES = ("float16", "bfloat16", "float32", "float64")


def _sinks(torch, sinks, query):
    """sinks checked against the query before any device work: one float tensor [num_qo_heads].

    FlashInfer types the argument List[Tensor] but its kernels take one tensor, so a list holding just
    that tensor is unwrapped. float32 is what the kernel reads; the other float dtypes are converted,
    with a copy.
    """
    if isinstance(sinks, (list, tuple)):
        if len(sinks) != 1:
            raise invalid_argument(f"sinks: a {type(sinks).__name__} of {len(sinks)} items is not allowed; allowed: "
                                   "one float32 tensor [num_qo_heads] (or a list holding just it)")
        sinks = sinks[0]
    checks.tensor(torch, "sinks", sinks)
    if sinks.dtype not in [getattr(torch, name) for name in _SINK_DTYPES]:
        raise invalid_argument(f"sinks: dtype {sinks.dtype} is not allowed; allowed: torch.float32 (float16, "
                               "bfloat16 and float64 are converted with a copy)")
    if query.dim() == 3 and (sinks.dim() != 1 or sinks.shape[0] != query.shape[1]):
        raise invalid_argument(f"sinks: shape {list(sinks.shape)} is not allowed; allowed: [num_qo_heads] with "
                               f"num_qo_heads={query.shape[1]} from the query")
    return sinks.to(device=query.device, dtype=torch.float32).contiguous()  # no copy when it is already so


def _out(torch, query, out, dtype):
    if out is None:
        return torch.empty(query.shape, dtype=dtype, device=query.device)
    checks.cuda_tensor(torch, "out", out)
    if out.dtype != dtype:
        raise invalid_argument(f"out: dtype {out.dtype} differs from out_dtype {dtype}; they must be equal")
    return out


def _lse(torch, query, lse, return_lse):
    """The caller's lse (checked) or, with return_lse, a new one: float32 [num_tokens, num_qo_heads]."""
    if lse is None and not return_lse:
        return None
    return checks.output(torch, "lse", lse, query.shape[:2], torch.float32, query.device)


def _block_table(torch, name, value, device):
    """block_tables as the C API takes it: int32 on the query's device (uint32 page ids reinterpreted, not cast)."""
    value = checks.device_index(torch, name, value, device, ndim=None, allow_uint32=True)
    return value if value.dtype == torch.int32 else value.view(torch.int32)


def _batch_offsets(torch, name, value, device):
    """cuDNN's batch offsets, int32 or int64 as FlashInfer takes them, as the int32 the C API reads: int64 is
    converted with a copy (element offsets of one tensor fit int32; reading them back to check would sync)."""
    if value is None:
        return None
    checks.tensor(torch, name, value)
    if value.dtype == torch.int64:
        value = value.to(torch.int32)
    return checks.device_index(torch, name, value, device)


def _trtllm(torch, query, k_cache, v_cache, workspace_buffer, block_tables, seq_lens, max_seq_len, options, sinks,
            pdl, q_len_per_req, max_q_len, cum_seq_lens_q, bmm1_tensor, bmm2_tensor, out, lse, mask=None):
    """attnjit_trtllm_batch_decode_with_kv_cache_v3, or _v4 (the same with the draft-tree mask) for a mask."""
    ws, ws_bytes, _ = checks.workspace(torch, "workspace_buffer", workspace_buffer)
    with Borrowed() as borrowed, current_stream(torch, query.device) as stream:
        leading = (_runtime.handle(), borrowed.tensor(query, "query"), borrowed.tensor(k_cache, "k_cache"),
                   borrowed.optional(v_cache, "v_cache"), ws, ws_bytes, borrowed.tensor(block_tables, "block_tables"),
                   borrowed.tensor(seq_lens, "seq_lens"), max_seq_len, ctypes.byref(options),
                   borrowed.optional(sinks, "sinks"), pdl, q_len_per_req, 0 if max_q_len is None else max_q_len,
                   borrowed.optional(cum_seq_lens_q, "cum_seq_lens_q"), borrowed.optional(bmm1_tensor, "bmm1_scale"),
                   borrowed.optional(bmm2_tensor, "bmm2_scale"))
        trailing = (borrowed.tensor(out, "out"), borrowed.optional(lse, "lse"), stream)
        if mask is None:
            check(lib().attnjit_trtllm_batch_decode_with_kv_cache_v3(*leading, *trailing))
        else:
            check(lib().attnjit_trtllm_batch_decode_with_kv_cache_v4(*leading, borrowed.tensor(mask, "mask"),
                                                                     *trailing))


def trtllm_batch_decode_with_kv_cache(query, kv_cache, workspace_buffer, block_tables, seq_lens, max_seq_len,
                                      bmm1_scale=1.0, bmm2_scale=1.0, window_left=-1, out=None, out_dtype=None,
                                      o_sf_scale=None, o_sf_vec_size=None, sinks=None, kv_layout="HND",
                                      enable_pdl=None, backend="auto", q_len_per_req=1, o_scale=1.0, mask=None,
                                      max_q_len=None, cum_seq_lens_q=None, skip_softmax_threshold_scale_factor=None,
                                      kv_cache_sf=None, uses_shared_paged_kv_idx=True, lse=None, return_lse=False,
                                      bmm1_scale_log2=None, multi_ctas_kv_counter_buffer=None,
                                      enable_block_sparse_attention=False, cp_world=1, cp_rank=0,
                                      causal_seqlens_kv_global=None, bf16q_fp8kv_transform_mode=None,
                                      request_order=None, request_order_plan=None):
    """flashinfer.decode.trtllm_batch_decode_with_kv_cache: query [num_tokens, num_qo_heads, head_dim]; kv_cache
    one 5-D tensor [pages, 2, ...] ([pages, 1, ...]: K and V are one) or (k_cache, v_cache) in kv_layout;
    block_tables [batch, max_pages] (or [batch, 2, max_pages] with uses_shared_paged_kv_idx=False), int32 or
    uint32; seq_lens [batch], int32 or uint32. Returns out, shaped like query, or (out, lse) with return_lse.

    Speculative decoding: q_len_per_req query tokens per request (num_tokens = batch * q_len_per_req,
    request b's token t at row b * q_len_per_req + t), or per-request lengths with max_q_len and
    cum_seq_lens_q (int32 [batch + 1], request b's tokens at rows cum_seq_lens_q[b] ..; batch is then
    seq_lens' length), which go together. Token t of a request of KV length L sees keys up to position
    L - q_len + t. At most 64 tokens per request.
    bmm1_scale (the whole softmax scale) and bmm2_scale (the output's factor): a float, or a float32 CUDA
    tensor of one value that the kernels read when they run (a CUDA graph replays with its value then);
    bmm1_scale_log2 (bmm1_scale * log2(e), a float32 tensor of one value) takes precedence over bmm1_scale.
    sinks: a float32 tensor [num_qo_heads], one logit per query head (in the units of the scaled scores)
    added to that head's softmax denominator. enable_pdl: programmatic dependent launch; None lets the library
    decide (on for sm_90 and newer), True below sm_90 is UNSUPPORTED. lse: a float32 [num_tokens, num_qo_heads]
    CUDA tensor, filled (base 2, sinks included) whenever given. multi_ctas_kv_counter_buffer: TensorRT-LLM's
    multi-CTA counters; attnjit's kernels keep no counters, so none is read from it. mask: the draft-tree mask
    of speculative decoding (FlashInfer's bit-packed rows, one per query token), where the library has
    attnjit_trtllm_batch_decode_with_kv_cache_v4; UNSUPPORTED otherwise.
    """
    torch = require_torch()
    if mask is not None and not has("attnjit_trtllm_batch_decode_with_kv_cache_v4"):
        raise checks.unsupported(f"mask={checks.short(mask)} is not supported by this library (it has no "
                                 "attnjit_trtllm_batch_decode_with_kv_cache_v4); allowed: None")
    checks.refuse_if_given(o_sf_scale=o_sf_scale, o_sf_vec_size=o_sf_vec_size,
                           skip_softmax_threshold_scale_factor=skip_softmax_threshold_scale_factor,
                           kv_cache_sf=kv_cache_sf, causal_seqlens_kv_global=causal_seqlens_kv_global,
                           bf16q_fp8kv_transform_mode=bf16q_fp8kv_transform_mode, request_order=request_order,
                           request_order_plan=request_order_plan)
    checks.refuse_unless("enable_block_sparse_attention", enable_block_sparse_attention, (False,),
                         "attnjit reads one page list per request for every KV head")
    checks.refuse_unless("cp_world", cp_world, (1,), "decode-context parallelism is TensorRT-LLM's (Cake) alone")
    checks.refuse_unless("cp_rank", cp_rank, (0,), "decode-context parallelism is TensorRT-LLM's (Cake) alone")
    if isinstance(out_dtype, str) and out_dtype == "nvfp4":
        raise checks.unsupported("out_dtype='nvfp4' is not supported on this architecture (TensorRT-LLM writes NVFP4 "
                                 "on Blackwell, sm_100, only); allowed: None or a float dtype")
    checks.refuse_unless("backend", backend, ("auto",), "attnjit runs its own kernels")
    q_len_per_req = 1 if q_len_per_req is None else checks.positive_int("q_len_per_req", q_len_per_req)
    checks.together("max_q_len", max_q_len, "cum_seq_lens_q", cum_seq_lens_q)
    if max_q_len is not None:
        checks.positive_int("max_q_len", max_q_len)
    checks.refuse_unless("o_scale", o_scale, (None, 1.0), "it scales xqa's fp8 output")
    options = c_types.TrtllmDecodeOptions()
    lib().attnjit_trtllm_decode_options_init(ctypes.byref(options))
    options.kv_layout = checks.kv_layout(kv_layout)
    options.window_left = checks.window(window_left)
    options.uses_shared_paged_kv_idx = checks.flag("uses_shared_paged_kv_idx", uses_shared_paged_kv_idx)
    options.bmm1_scale, bmm1_tensor = checks.scale_or_tensor(torch, "bmm1_scale", bmm1_scale, 1.0)
    options.bmm2_scale, bmm2_tensor = checks.scale_or_tensor(torch, "bmm2_scale", bmm2_scale, 1.0)
    pdl = checks.tri_state("enable_pdl", enable_pdl)
    return_lse = bool(checks.flag("return_lse", return_lse))
    checks.positive_int("max_seq_len", max_seq_len)
    checks.tensor(torch, "query", query)
    if bmm1_scale_log2 is not None:
        scale_log2, bmm1_tensor = checks.scale_or_tensor(torch, "bmm1_scale_log2", bmm1_scale_log2, None)
        if bmm1_tensor is None:
            options.bmm1_scale = scale_log2 * checks.LN2
        else:
            bmm1_tensor = bmm1_tensor * checks.LN2  # a one-value kernel on the stream: graph-capturable
    # Index dtypes first: refused by name whatever the device.
    checks.index_array(torch, "block_tables", block_tables, ndim=None, allow_uint32=True)
    checks.index_array(torch, "seq_lens", seq_lens, allow_uint32=True)
    if cum_seq_lens_q is not None:
        checks.index_array(torch, "cum_seq_lens_q", cum_seq_lens_q)
    if sinks is not None:
        sinks = _sinks(torch, sinks, query)
    checks.cuda_tensor(torch, "query", query)
    if mask is not None:
        checks.cuda_tensor(torch, "mask", mask)
    if multi_ctas_kv_counter_buffer is not None:
        checks.cuda_tensor(torch, "multi_ctas_kv_counter_buffer", multi_ctas_kv_counter_buffer)
    k_cache, v_cache = checks.kv_cache_pair(torch, "kv_cache", kv_cache)
    dtype = query.dtype if out_dtype is None else checks.dtype_of(torch, "out_dtype", out_dtype)
    if out_dtype is None and out is not None:
        dtype = out.dtype  # FlashInfer: "if not provided, will use the type of out"
    out = _out(torch, query, out, dtype)
    lse = _lse(torch, query, lse, return_lse)
    tables = _block_table(torch, "block_tables", block_tables, query.device)
    lens = checks.device_index(torch, "seq_lens", seq_lens, query.device, allow_uint32=True)
    if cum_seq_lens_q is not None:
        cum_seq_lens_q = checks.device_index(torch, "cum_seq_lens_q", cum_seq_lens_q, query.device)
    _trtllm(torch, query, k_cache, v_cache, workspace_buffer, tables, lens, max_seq_len, options, sinks, pdl,
            q_len_per_req, max_q_len, cum_seq_lens_q, bmm1_tensor, bmm2_tensor, out, lse, mask)
    return (out, lse) if return_lse else out


def cudnn_batch_decode_with_kv_cache(q, k_cache, v_cache, scale, workspace_buffer, *, max_sequence_kv,
                                     actual_seq_lens_kv=None, block_tables=None, is_cuda_graph_compatible=False,
                                     batch_offsets_q=None, batch_offsets_o=None, batch_offsets_k=None,
                                     batch_offsets_v=None, out=None, return_lse=False, lse=None, q_len_per_req=1,
                                     window_left=-1, sinks=None):
    """flashinfer.cudnn.cudnn_batch_decode_with_kv_cache: q [batch * q_len_per_req, num_qo_heads, head_dim];
    k_cache, v_cache [pages, num_kv_heads, page_size, head_dim]; actual_seq_lens_kv [batch] (or [batch, 1, 1,
    1]; int32 or uint32; a CPU tensor is copied to q's device); block_tables [batch, max_pages], int32. Returns
    out, or (out, lse) with return_lse (lse float32 [batch * q_len_per_req, num_qo_heads], base 2).

    q_len_per_req > 1: the rows of one request are consecutive and see the keys under the bottom-right causal
    diagonal. window_left: FlashInfer's left window. sinks: float32 [num_qo_heads]. Those, lse and return_lse
    take TensorRT-LLM's entry point (same block table and lengths), which has no batch offsets: with
    batch_offsets_q / batch_offsets_o given they are UNSUPPORTED.

    batch_offsets_q, batch_offsets_o: cuDNN's ragged offsets, an int32 tensor of batch or batch + 1 entries
    (only the first batch entries are read). Entry b is the offset, in elements from q's (out's) first
    element, of request b's row; head h of that row is at that offset + h * stride(1). None: row b at
    b * stride(0). The values stay on the device and are not checked. batch_offsets_k, batch_offsets_v are
    UNSUPPORTED: this entry point takes the paged K/V cache through block_tables.

    is_cuda_graph_compatible is accepted either way: attnjit's launch depends only on the shapes, so every
    call is graph-compatible.
    """
    torch = require_torch()
    for name, value in (("batch_offsets_k", batch_offsets_k), ("batch_offsets_v", batch_offsets_v)):
        if value is not None:
            raise checks.unsupported(f"{name}={checks.short(value)} is not supported: this entry point takes the "
                                     "paged K/V cache through block_tables, and ragged K/V offsets address a "
                                     "non-paged cache; allowed: None")
    checks.flag("is_cuda_graph_compatible", is_cuda_graph_compatible)
    return_lse = bool(checks.flag("return_lse", return_lse))
    checks.positive_int("q_len_per_req", q_len_per_req)
    checks.window(window_left)
    if actual_seq_lens_kv is None:
        raise invalid_argument("actual_seq_lens_kv: is None; allowed: an int32 tensor [batch_size] of KV lengths")
    if block_tables is None:
        raise checks.unsupported("block_tables=None (a non-paged cache) is not supported; allowed: an int32 tensor "
                                 "[batch_size, max_pages]")
    scale = checks.scale(torch, "scale", scale)
    if scale is None:
        raise invalid_argument("scale: is None; allowed: a float > 0 (typically 1/sqrt(head_dim))")
    checks.positive_int("max_sequence_kv", max_sequence_kv)
    checks.index_array(torch, "actual_seq_lens_kv", actual_seq_lens_kv, ndim=None, allow_uint32=True)
    checks.index_array(torch, "block_tables", block_tables, ndim=2)
    checks.cuda_tensor(torch, "q", q)
    checks.tensor(torch, "k_cache", k_cache)
    checks.tensor(torch, "v_cache", v_cache)
    if sinks is not None:
        sinks = _sinks(torch, sinks, q)
    out = _out(torch, q, out, q.dtype)
    lse = _lse(torch, q, lse, return_lse)
    lens = checks.device_index(torch, "actual_seq_lens_kv", actual_seq_lens_kv, q.device, ndim=None,
                               allow_uint32=True)
    lens = lens.reshape(-1)
    tables = checks.device_index(torch, "block_tables", block_tables, q.device, ndim=2)
    extras = lse is not None or q_len_per_req != 1 or window_left != -1 or sinks is not None
    if extras:
        if batch_offsets_q is not None or batch_offsets_o is not None:
            raise checks.unsupported("batch_offsets_q / batch_offsets_o together with return_lse, lse, "
                                     "q_len_per_req > 1, window_left or sinks are not supported (attnjit computes "
                                     "those on the entry point without batch offsets); allowed: one or the other")
        options = c_types.TrtllmDecodeOptions()
        lib().attnjit_trtllm_decode_options_init(ctypes.byref(options))
        options.kv_layout = checks.KV_LAYOUTS["HND"]  # cuDNN's cache: [pages, num_kv_heads, page_size, head_dim]
        options.window_left = window_left
        options.bmm1_scale, options.bmm2_scale = scale, 1.0
        _trtllm(torch, q, k_cache, v_cache, workspace_buffer, tables, lens, max_sequence_kv, options, sinks, -1,
                q_len_per_req, None, None, None, None, out, lse)
        return (out, lse) if return_lse else out
    ws, ws_bytes, _ = checks.workspace(torch, "workspace_buffer", workspace_buffer)
    batch_offsets_q = _batch_offsets(torch, "batch_offsets_q", batch_offsets_q, q.device)
    batch_offsets_o = _batch_offsets(torch, "batch_offsets_o", batch_offsets_o, q.device)
    with Borrowed() as borrowed, current_stream(torch, q.device) as stream:
        check(lib().attnjit_cudnn_batch_decode_with_kv_cache_v2(
            _runtime.handle(), borrowed.tensor(q, "q"), borrowed.tensor(k_cache, "k_cache"),
            borrowed.tensor(v_cache, "v_cache"), scale, ws, ws_bytes, max_sequence_kv,
            borrowed.tensor(lens, "actual_seq_lens_kv"), borrowed.tensor(tables, "block_tables"),
            borrowed.optional(batch_offsets_q, "batch_offsets_q"),
            borrowed.optional(batch_offsets_o, "batch_offsets_o"), borrowed.tensor(out, "out"), stream))
    return out
