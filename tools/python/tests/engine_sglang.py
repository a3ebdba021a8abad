"""SGLang's FlashInfer attention backend, as its calls reach the library (python/sglang/srt/layers/attention/
flashinfer_backend.py: FlashInferAttnBackend, FlashInferIndicesUpdaterPrefill / Decode .call_begin_forward,
forward_extend, forward_decode), for the engine harness (test_engine_harness.py). `fi` is the library module
the engine imports as `flashinfer`.

What SGLang does and this replays:
- One float workspace shared by a ragged prefill wrapper (backend "auto"), a paged prefill wrapper and a
  decode wrapper (backend "fa2"; tensor cores where the GQA group is 4 or more), and one CUDA-graph decode
  wrapper per captured batch size, whose buffers are slices of the backend's kv_indptr / kv_last_page_len
  (all ones) and one shared cuda_graph_kv_indices buffer.
- A token pool: page size 1, K and V buffers [slots, kv_heads, head_dim] passed as a (k, v) tuple; each
  request's slots in a req_to_token row, turned into kv_indices on the device (its Triton kernel).
- Extend (prefill chunks, and with mixed chunking the decoding requests as one-token extends): begin_forward
  of the ragged wrapper (qo_indptr as both indptrs) and the paged one (the cached prefix, page size 1,
  index arrays on the device, kv_indices 256 entries longer than used); forward() of the ragged wrapper
  alone where no request has a cached prefix, else forward_return_lse of both (ragged causal over the new
  tokens, paged non-causal over the prefix) merged with flashinfer.cascade.merge_state. The new K/V are
  written after the attention.
- Decode: K/V written first; a batch up to the largest capture size is padded to a captured size (padding
  requests of length 1 on slot 0 through req_to_token row 0), its wrappers planned with begin_forward (the
  whole cuda_graph_kv_indices buffer as indices) when first captured, then begin_forward replaced by
  partial(fast_decode_plan, wrapper) and called with global_override_indptr_cpu before each replay; a larger
  batch runs the eager decode wrapper. forward() with sm_scale and logits_soft_cap every call.
"""

import importlib
from functools import partial

import torch

import engine_graph

I32 = torch.int32
WORKSPACE_BYTES = 128 * 1024 * 1024


class SglangFlashInferBackend:
    def __init__(self, fi, heads, kv_heads, head_dim, dtype, kv_buffer, device, max_bs=8, max_context_len=512,
                 capture_sizes=(1, 2, 4), logit_cap=0.0):
        self.fi, self.device = fi, torch.device(device)
        self.heads, self.kv_heads, self.head_dim, self.dtype = heads, kv_heads, head_dim, dtype
        self.kv_buffer, self.capture_sizes, self.logit_cap = kv_buffer, capture_sizes, logit_cap
        self.scaling = head_dim ** -0.5  # RadixAttention.scaling
        self.merge_state = importlib.import_module(fi.__name__ + ".cascade").merge_state
        self.decode_use_tensor_cores = heads // kv_heads >= 4  # should_use_tensor_core for 16-bit KV
        ws = self.workspace = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=self.device)
        self.kv_indptr = [torch.zeros(max_bs + 1, dtype=I32, device=self.device)]
        self.kv_last_page_len = torch.ones(max_bs, dtype=I32, device=self.device)
        self.qo_indptr = [torch.zeros(max_bs + 1, dtype=I32, device=self.device)]
        self.prefill_wrapper_ragged = fi.BatchPrefillWithRaggedKVCacheWrapper(ws, "NHD", backend="auto")
        self.prefill_wrappers_paged = [fi.BatchPrefillWithPagedKVCacheWrapper(ws, "NHD", backend="fa2")]
        self.prefill_wrappers_verify = [fi.BatchPrefillWithPagedKVCacheWrapper(ws, "NHD", backend="fa2")]
        self.decode_wrappers = [fi.BatchDecodeWithPagedKVCacheWrapper(
            ws, "NHD", backend="fa2", use_tensor_cores=self.decode_use_tensor_cores)]
        # init_static_metadata_buffers(max_bs, max_num_tokens=max_bs)
        self.cuda_graph_kv_indices = [torch.zeros(max_bs * max_context_len, dtype=I32, device=self.device)]
        self.decode_cuda_graph_metadata = {}  # padded batch size -> [decode wrapper]
        self._graphs = {}  # padded batch size -> engine_graph.CapturedCall
        self.static_q = torch.zeros(max(capture_sizes), heads, head_dim, dtype=dtype, device=self.device)
        # The req_to_token pool; row 0 holds the padding request (its one token on slot 0).
        self.req_to_token = torch.zeros(max_bs + 1, max_context_len, dtype=I32, device=self.device)
        self._rows, self._free_rows = {}, list(range(1, max_bs + 1))

    # ---- the request pool ----

    def place(self, batch):
        """Gives each request a req_to_token row and writes its slots there (the allocator's work before a
        forward)."""
        for s in batch:
            if s.rid not in self._rows:
                self._rows[s.rid] = self._free_rows.pop(0)
            self.req_to_token[self._rows[s.rid], :s.kv_len] = torch.tensor(s.pages[:s.kv_len], dtype=I32,
                                                                            device=self.device)

    def release(self, rid):
        if rid in self._rows:
            self._free_rows.append(self._rows.pop(rid))

    def _kv_indices(self, req_pool_indices, lens, kv_indices):
        """create_flashinfer_kv_indices_triton: each request's first lens[i] slots, concatenated."""
        rows = self.req_to_token[req_pool_indices]
        keep = torch.arange(rows.shape[1], device=self.device)[None, :] < lens[:, None]
        picked = rows[keep]
        kv_indices[:picked.numel()] = picked

    # ---- extend (prefill chunks; decodes as one-token extends when mixed) ----

    def extend(self, batch, q, k, v):
        """forward_extend after FlashInferIndicesUpdaterPrefill.update (use_ragged): q [tokens, heads, D], k, v
        [tokens, kv_heads, D] (views) in batch order. Returns (o, parts): parts is None where no request has a
        cached prefix, else (o_ragged, lse_ragged, o_paged, lse_paged, lse_merged)."""
        bs = len(batch)
        req_pool_indices = torch.tensor([self._rows[s.rid] for s in batch], device=self.device)
        seq_lens = torch.tensor([s.kv_len for s in batch], device=self.device)
        prefix_lens = torch.tensor([s.cached for s in batch], device=self.device)
        extend_no_prefix = not any(s.cached for s in batch)
        # call_begin_forward: the paged wrapper covers the cached prefix, the ragged one the new tokens.
        paged_kernel_lens_sum = prefix_lens.sum().item()
        kv_indptr = self.kv_indptr[0]
        kv_indptr[1:bs + 1] = torch.cumsum(prefix_lens, dim=0)
        kv_indptr = kv_indptr[:bs + 1]
        kv_indices = torch.empty(paged_kernel_lens_sum + 256, dtype=I32, device=self.device)
        self._kv_indices(req_pool_indices, prefix_lens, kv_indices)
        qo_indptr = self.qo_indptr[0]
        qo_indptr[1:bs + 1] = torch.cumsum(seq_lens - prefix_lens, dim=0)
        qo_indptr = qo_indptr[:bs + 1]
        ragged, paged = self.prefill_wrapper_ragged, self.prefill_wrappers_paged[0]
        ragged.begin_forward(qo_indptr, qo_indptr, self.heads, self.kv_heads, self.head_dim, q_data_type=self.dtype)
        paged.begin_forward(qo_indptr, kv_indptr, kv_indices, self.kv_last_page_len[:bs], self.heads, self.kv_heads,
                            self.head_dim, 1, q_data_type=self.dtype, kv_data_type=self.dtype, custom_mask=None,
                            non_blocking=True, fixed_split_size=None, prefix_len_ptr=None,
                            token_pos_in_items_ptr=None, token_pos_in_items_len=0, max_item_len_ptr=None)
        q = q.contiguous()
        if extend_no_prefix:
            o = ragged.forward(q, k, v, causal=True, sm_scale=self.scaling, logits_soft_cap=self.logit_cap)
            return o, None
        o1, s1 = ragged.forward_return_lse(q, k, v, causal=True, sm_scale=self.scaling, window_left=-1,
                                           logits_soft_cap=self.logit_cap)
        o2, s2 = paged.forward_return_lse(q, self.kv_buffer, causal=False, sm_scale=self.scaling, window_left=-1,
                                          logits_soft_cap=self.logit_cap)
        o, s = self.merge_state(o1, s1, o2, s2)
        return o, (o1, s1, o2, s2, s)

    # ---- decode ----

    def _call_begin_forward_decode(self, wrapper, req_pool_indices, seq_lens, seq_lens_sum, seq_lens_cpu):
        """FlashInferIndicesUpdaterDecode.call_begin_forward (no spec_info, no sliding window)."""
        bs = len(req_pool_indices)
        kv_indptr = self.kv_indptr[0]
        kv_indptr[1:bs + 1] = torch.cumsum(seq_lens, dim=0)
        kv_indptr = kv_indptr[:bs + 1]
        if wrapper.is_cuda_graph_enabled:
            kv_indices = wrapper._paged_kv_indices_buf  # written in place: the graph's input
        else:
            kv_indices = torch.empty(seq_lens_sum, dtype=I32, device=self.device)
        self._kv_indices(req_pool_indices, seq_lens, kv_indices)
        global_override_indptr_cpu = torch.empty_like(kv_indptr, device="cpu")
        global_override_indptr_cpu[0] = 0
        global_override_indptr_cpu[1:bs + 1] = torch.cumsum(seq_lens_cpu, dim=0)
        args = (kv_indptr, kv_indices, self.kv_last_page_len[:bs], self.heads, self.kv_heads, self.head_dim, 1)
        kwargs = dict(data_type=self.dtype, q_data_type=self.dtype, non_blocking=True, fixed_split_size=None,
                      disable_split_kv=False)
        if hasattr(wrapper.begin_forward, "func") and wrapper.begin_forward.func == self.fi.fast_decode_plan:
            wrapper.begin_forward(*args, **kwargs, global_override_indptr_cpu=global_override_indptr_cpu)
        else:
            wrapper.begin_forward(*args, **kwargs)

    def _forward_decode(self, wrapper, q):
        return wrapper.forward(q.contiguous().view(-1, self.heads, self.head_dim), self.kv_buffer,
                               sm_scale=self.scaling, logits_soft_cap=self.logit_cap, k_scale=None, v_scale=None)

    def decode(self, batch, q):
        """forward_decode after the KV write: q [bs, heads, D]. Returns o [bs, heads, D]."""
        bs = len(batch)
        lens = [s.kv_len for s in batch]
        rows = [self._rows[s.rid] for s in batch]
        if bs > max(self.capture_sizes):
            seq_lens_cpu = torch.tensor(lens)
            self._call_begin_forward_decode(self.decode_wrappers[0], torch.tensor(rows, device=self.device),
                                            seq_lens_cpu.to(self.device), sum(lens), seq_lens_cpu)
            return self._forward_decode(self.decode_wrappers[0], q)
        padded = min(size for size in self.capture_sizes if size >= bs)
        lens += [1] * (padded - bs)  # get_cuda_graph_seq_len_fill_value
        rows += [0] * (padded - bs)
        seq_lens_cpu = torch.tensor(lens)
        in_capture = padded not in self.decode_cuda_graph_metadata
        if in_capture:
            self.decode_cuda_graph_metadata[padded] = [self.fi.BatchDecodeWithPagedKVCacheWrapper(
                self.workspace, "NHD", backend="fa2", use_cuda_graph=True,
                use_tensor_cores=self.decode_use_tensor_cores,
                paged_kv_indptr_buffer=self.kv_indptr[0][:padded + 1],
                paged_kv_indices_buffer=self.cuda_graph_kv_indices[0],
                paged_kv_last_page_len_buffer=self.kv_last_page_len[:padded])]
        wrappers = self.decode_cuda_graph_metadata[padded]
        try:
            self._call_begin_forward_decode(wrappers[0], torch.tensor(rows, device=self.device),
                                            seq_lens_cpu.to(self.device), sum(lens), seq_lens_cpu)
            if in_capture:
                for w in wrappers:  # fast_decode_plan needs the first plan's state: installed after it
                    w.begin_forward = partial(self.fi.fast_decode_plan, w)
            self.static_q[:bs].copy_(q)
            if padded not in self._graphs:
                self._graphs[padded] = engine_graph.CapturedCall(
                    lambda: self._forward_decode(wrappers[0], self.static_q[:padded]))
        except Exception:
            # A wrapper whose plan failed goes with its graph (the graph holds its old plan).
            self.decode_cuda_graph_metadata.pop(padded, None)
            self._graphs.pop(padded, None)
            raise
        return self._graphs[padded].replay()[:bs]
