"""TensorRT-LLM's and cuDNN's batch decode (block tables + device lengths)
with FlashInfer's signatures, over the C API (attnjit_batch_decode.h;
TensorRT-LLM's through attnjit_trtllm_batch_decode_with_kv_cache_v3, which
takes sinks, enable_pdl, speculative decoding's query lengths and
device-tensor scales; cuDNN's through
attnjit_cudnn_batch_decode_with_kv_cache_v2, which takes the ragged batch
offsets of q and out).

Both are one call: the library memoizes the plan per problem and splits
every request the same way (the lengths stay on the device), so a call is
graph-capturable as long as its inputs already have the types asked for
(int32 on the query's device; anything else is converted with a copy).
Arguments for features attnjit lacks are refused with an UNSUPPORTED
AttnjitError naming them, never ignored.
"""

import ctypes

from . import _batch_args as A
from . import _ctypes_types as T
from . import _runtime
from ._streams import current_stream
from ._dlpack import Borrowed, require_torch
from ._library import check, lib
from .errors import invalid_argument


_SINK_DTYPES = ("float16", "bfloat16", "float32", "float64")


def _sinks(torch, sinks, query):
    """sinks checked against the query before any device work: one float tensor [num_qo_heads].

    FlashInfer types the argument List[Tensor] but its kernels take one tensor, so a list holding just
    that tensor is unwrapped. float32 is what the kernel reads; the other float dtypes are converted
    later, with a copy (as index arrays are).
    """
    if isinstance(sinks, (list, tuple)):
        if len(sinks) != 1:
            raise invalid_argument(f"sinks: a {type(sinks).__name__} of {len(sinks)} items is not allowed; allowed: "
                                   "one float32 tensor [num_qo_heads] (or a list holding just it)")
        sinks = sinks[0]
    A.tensor(torch, "sinks", sinks)
    if sinks.dtype not in [getattr(torch, name) for name in _SINK_DTYPES]:
        raise invalid_argument(f"sinks: dtype {sinks.dtype} is not allowed; allowed: torch.float32 (float16, "
                               "bfloat16 and float64 are converted with a copy)")
    if query.dim() != 3:
        return sinks  # the library refuses the query's shape first
    if sinks.dim() != 1 or sinks.shape[0] != query.shape[1]:
        raise invalid_argument(f"sinks: shape {list(sinks.shape)} is not allowed; allowed: [num_qo_heads] with "
                               f"num_qo_heads={query.shape[1]} from the query")
    return sinks


def _out(torch, query, out, dtype):
    if out is None:
        return torch.empty(query.shape, dtype=dtype, device=query.device)
    A.cuda_tensor(torch, "out", out)
    if out.dtype != dtype:
        raise invalid_argument(f"out: dtype {out.dtype} differs from out_dtype {dtype}; they must be equal")
    return out


def trtllm_batch_decode_with_kv_cache(query, kv_cache, workspace_buffer, block_tables, seq_lens, max_seq_len,
                                      bmm1_scale=1.0, bmm2_scale=1.0, window_left=-1, out=None, out_dtype=None,
                                      o_sf_scale=None, o_sf_vec_size=None, sinks=None, kv_layout="HND",
                                      enable_pdl=None, backend="auto", q_len_per_req=1, o_scale=1.0, mask=None,
                                      max_q_len=None, cum_seq_lens_q=None, kv_block_scales=None,
                                      skip_softmax_threshold_scale_factor=None, kv_cache_sf=None,
                                      uses_shared_paged_kv_idx=True, *, lse=None):
    """flashinfer.decode.trtllm_batch_decode_with_kv_cache: query [num_tokens, num_qo_heads, head_dim]; kv_cache
    one 5-D tensor [pages, 2, ...] or (k_cache, v_cache) in kv_layout; block_tables [batch, max_pages] (or
    [batch, 2, max_pages] with uses_shared_paged_kv_idx=False); seq_lens [batch]. Returns out, shaped like
    query.

    Speculative decoding: q_len_per_req query tokens per request (num_tokens = batch * q_len_per_req,
    request b's token t at row b * q_len_per_req + t), or per-request lengths with max_q_len and
    cum_seq_lens_q (int32 [batch + 1], request b's tokens at rows cum_seq_lens_q[b] ..; batch is then
    seq_lens' length), which go together. Token t of a request of KV length L sees keys up to position
    L - q_len + t. At most 64 tokens per request.
    bmm1_scale (the whole softmax scale) and bmm2_scale (the output's factor): a float, or a float32 CUDA
    tensor of one value that the kernels read when they run (a CUDA graph replays with its value then).

    sinks: a float32 tensor [num_qo_heads], one logit per query head (in the units of the scaled scores)
    added to that head's softmax denominator; another float dtype or device is converted with a copy.
    enable_pdl: programmatic dependent launch; None lets the library decide (on for sm_90 and newer),
    True below sm_90 is UNSUPPORTED. The output is the same either way.
    lse (an attnjit extension): a float32 [num_tokens, num_qo_heads] CUDA tensor to fill with the base-2 lse
    (sinks included).
    """
    torch = require_torch()
    # Features of TensorRT-LLM attnjit does not have: refused by name.
    A.refuse_if_given(o_sf_scale=o_sf_scale, o_sf_vec_size=o_sf_vec_size, mask=mask, kv_block_scales=kv_block_scales,
                      skip_softmax_threshold_scale_factor=skip_softmax_threshold_scale_factor,
                      kv_cache_sf=kv_cache_sf)
    if isinstance(out_dtype, str) and out_dtype == "nvfp4":
        raise A.unsupported("out_dtype='nvfp4' is not supported on this architecture (TensorRT-LLM writes NVFP4 "
                            "on Blackwell, sm_100, only); allowed: None or a float dtype")
    if backend != "auto":
        raise A.unsupported(f"backend={backend!r} is not available: attnjit runs its own kernels; allowed: 'auto'")
    q_len_per_req = 1 if q_len_per_req is None else A.positive_int("q_len_per_req", q_len_per_req)
    A.together("max_q_len", max_q_len, "cum_seq_lens_q", cum_seq_lens_q)
    if max_q_len is not None:
        A.positive_int("max_q_len", max_q_len)
    if o_scale not in (None, 1.0):
        raise A.unsupported(f"o_scale={o_scale!r} is not supported (it scales xqa's fp8 output); allowed: 1.0")

    options = T.TrtllmDecodeOptions()
    lib().attnjit_trtllm_decode_options_init(ctypes.byref(options))
    options.kv_layout = A.kv_layout(kv_layout)
    options.window_left = A.window(window_left)
    options.uses_shared_paged_kv_idx = A.flag("uses_shared_paged_kv_idx", uses_shared_paged_kv_idx)
    options.bmm1_scale, bmm1_tensor = A.scale_or_tensor(torch, "bmm1_scale", bmm1_scale, 1.0)
    options.bmm2_scale, bmm2_tensor = A.scale_or_tensor(torch, "bmm2_scale", bmm2_scale, 1.0)
    pdl = A.tri_state("enable_pdl", enable_pdl)
    A.positive_int("max_seq_len", max_seq_len)
    A.tensor(torch, "query", query)
    if sinks is not None:
        sinks = _sinks(torch, sinks, query)
    A.cuda_tensor(torch, "query", query)
    k_cache, v_cache = A.kv_cache_pair(torch, "kv_cache", kv_cache)
    ws, ws_bytes, _ = A.workspace(torch, "workspace_buffer", workspace_buffer)
    dtype = query.dtype if out_dtype is None else A.dtype_of(torch, "out_dtype", out_dtype)
    if out_dtype is None and out is not None:
        dtype = out.dtype  # FlashInfer: "if not provided, will use the type of out"
    out = _out(torch, query, out, dtype)
    if lse is not None:
        A.cuda_tensor(torch, "lse", lse)
    tables = A.device_int32(torch, "block_tables", block_tables, query.device)
    lens = A.device_int32(torch, "seq_lens", seq_lens, query.device, allow_uint32=True)
    if cum_seq_lens_q is not None:
        cum_seq_lens_q = A.device_int32(torch, "cum_seq_lens_q", cum_seq_lens_q, query.device)
    if sinks is not None:
        sinks = sinks.to(device=query.device, dtype=torch.float32).contiguous()  # no copy when it is already so
    with Borrowed() as borrowed, current_stream(torch, query.device) as stream:
        check(lib().attnjit_trtllm_batch_decode_with_kv_cache_v3(
            _runtime.handle(), borrowed.tensor(query, "query"), borrowed.tensor(k_cache, "k_cache"),
            borrowed.optional(v_cache, "v_cache"), ws, ws_bytes, borrowed.tensor(tables, "block_tables"),
            borrowed.tensor(lens, "seq_lens"), max_seq_len, ctypes.byref(options), borrowed.optional(sinks, "sinks"),
            pdl, q_len_per_req, 0 if max_q_len is None else max_q_len,
            borrowed.optional(cum_seq_lens_q, "cum_seq_lens_q"), borrowed.optional(bmm1_tensor, "bmm1_scale"),
            borrowed.optional(bmm2_tensor, "bmm2_scale"), borrowed.tensor(out, "out"), borrowed.optional(lse, "lse"),
            stream))
    return out


def cudnn_batch_decode_with_kv_cache(q, k_cache, v_cache, scale, workspace_buffer, *, max_sequence_kv,
                                     actual_seq_lens_kv=None, block_tables=None, is_cuda_graph_compatible=False,
                                     batch_offsets_q=None, batch_offsets_o=None, batch_offsets_k=None,
                                     batch_offsets_v=None, out=None):
    """flashinfer.decode.cudnn_batch_decode_with_kv_cache: q [batch, num_qo_heads, head_dim]; k_cache,
    v_cache [pages, num_kv_heads, page_size, head_dim]; actual_seq_lens_kv [batch] (or [batch, 1, 1, 1]; a
    CPU tensor is copied to q's device); block_tables [batch, max_pages]. Returns out.

    batch_offsets_q, batch_offsets_o: cuDNN's ragged offsets, an integer tensor of batch or batch + 1
    entries (the cumulative form, as FlashInfer's ``torch.arange(0, batch + 1) * num_qo_heads * head_dim``;
    only the first batch entries are read), converted to int32 on q's device (a copy only when it is not
    so already). Entry b is the offset, in elements (not bytes) from q's (out's) first element, of request
    b's row; head h of that row is at that offset + h * stride(1). None: row b at b * stride(0). The values
    are not checked (they stay on the device): an offset that puts a row outside q's (out's) memory is
    undefined behaviour, as a bad block table. When out is None it is allocated like q, contiguous, so
    batch_offsets_o then addresses that fresh [batch, num_qo_heads, head_dim] tensor.
    batch_offsets_k, batch_offsets_v are refused (UNSUPPORTED): this entry point takes the paged K/V cache
    through block_tables, and ragged K/V offsets address a non-paged cache.

    is_cuda_graph_compatible is accepted either way: attnjit's launch depends only on the shapes, so every
    call is graph-compatible.
    """
    torch = require_torch()
    for name, value in (("batch_offsets_k", batch_offsets_k), ("batch_offsets_v", batch_offsets_v)):
        if value is not None:
            raise A.unsupported(f"{name}={A._short(value)} is not supported: this entry point takes the paged K/V "
                                "cache through block_tables, and ragged K/V offsets address a non-paged cache; "
                                "allowed: None")
    A.flag("is_cuda_graph_compatible", is_cuda_graph_compatible)
    if actual_seq_lens_kv is None:
        raise invalid_argument("actual_seq_lens_kv: is None; allowed: an int32 tensor [batch_size] of KV lengths")
    if block_tables is None:
        raise A.unsupported("block_tables=None (a non-paged cache) is not supported; allowed: an int32 tensor "
                            "[batch_size, max_pages]")
    scale = A.scale(torch, "scale", scale, None)
    if scale is None:
        raise invalid_argument("scale: is None; allowed: a float > 0 (typically 1/sqrt(head_dim))")
    A.positive_int("max_sequence_kv", max_sequence_kv)
    A.cuda_tensor(torch, "q", q)
    A.tensor(torch, "k_cache", k_cache)
    A.tensor(torch, "v_cache", v_cache)
    ws, ws_bytes, _ = A.workspace(torch, "workspace_buffer", workspace_buffer)
    out = _out(torch, q, out, q.dtype)
    lens = A.device_int32(torch, "actual_seq_lens_kv", actual_seq_lens_kv, q.device, allow_uint32=True)
    tables = A.device_int32(torch, "block_tables", block_tables, q.device)
    if batch_offsets_q is not None:
        batch_offsets_q = A.device_int32(torch, "batch_offsets_q", batch_offsets_q, q.device)
    if batch_offsets_o is not None:
        batch_offsets_o = A.device_int32(torch, "batch_offsets_o", batch_offsets_o, q.device)
    with Borrowed() as borrowed, current_stream(torch, q.device) as stream:
        check(lib().attnjit_cudnn_batch_decode_with_kv_cache_v2(
            _runtime.handle(), borrowed.tensor(q, "q"), borrowed.tensor(k_cache, "k_cache"),
            borrowed.tensor(v_cache, "v_cache"), scale, ws, ws_bytes, max_sequence_kv,
            borrowed.tensor(lens, "actual_seq_lens_kv"), borrowed.tensor(tables, "block_tables"),
            borrowed.optional(batch_offsets_q, "batch_offsets_q"),
            borrowed.optional(batch_offsets_o, "batch_offsets_o"), borrowed.tensor(out, "out"), stream))
    return out
