"""vLLM's FlashInfer attention backend, as its calls reach the library (vllm/v1/attention/backends/
flashinfer.py: FlashInferMetadataBuilder.build, fast_plan_decode, FlashInferImpl.forward), for the engine
harness (test_engine_harness.py). `fi` is the library module the engine imports as `flashinfer`.

What vLLM does and this replays:
- One float workspace (256 MiB) shared by every wrapper: a paged prefill wrapper, an eager decode wrapper,
  one CUDA-graph decode wrapper per padded batch size, and a two-level cascade wrapper.
- The page table: indptr and last_page_len computed in numpy into pinned int32 CPU buffers (indptr also
  copied to a persistent device buffer), the page indices written on the device from the block table into
  a persistent int32 buffer `paged_kv_indices`, which every CUDA-graph decode wrapper also holds as its
  paged_kv_indices_buffer (indptr / last_page_len buffers are slices of persistent device buffers).
- Decodes (one query token) first, prefills after. A mixed step plans the prefill wrapper with
  qo_indptr rebased to 0 but paged_kv_indptr[num_decodes:] as it is and every request's page indices, and
  the eager decode wrapper with indptr[:num_decodes + 1] and the same indices; run() writes into out=
  slices of one output tensor. The query is a view of packed QKV rows.
- A pure-decode step up to the largest capture size pads the batch to a capture size (padding requests:
  no pages, last_page_len 1), plans that size's CUDA-graph wrapper and replays its graph, captured on first
  use. vLLM's fast_plan_decode plans through plan() on a wrapper's first call; later calls on a CUDA-graph
  wrapper copy indptr / last_page_len into its buffers and call FlashInfer's private
  `_cached_module.plan(...)`; `private_replan=False` plans through plan() every time instead (attnjit has no
  such module: the test that asks for it names the gap).
- A step whose requests all start with the shared prefix (common_prefix_len > 0) runs the cascade
  wrapper: level 0 every query token against the prefix pages, level 1 each request's own pages, causal.
"""

import importlib
from dataclasses import dataclass, replace

import numpy as np
import torch

import engine_graph

I32 = torch.int32
WORKSPACE_BYTES = 256 * 1024 * 1024  # vLLM's FLASHINFER_WORKSPACE_BUFFER_SIZE


@dataclass(frozen=True)
class VllmConfig:
    heads: int
    kv_heads: int
    head_dim: int
    page_size: int
    dtype: torch.dtype
    kv_layout: str = "NHD"
    window_left: int = -1  # vLLM's sliding_window - 1
    logits_soft_cap: float = None
    max_num_reqs: int = 8
    max_pages_per_req: int = 64
    capture_sizes: tuple = (1, 2, 4)
    cascade: bool = False  # use the cascade wrapper where every request shares the prefix

    @property
    def sm_scale(self):
        return self.head_dim ** -0.5


@dataclass
class Metadata:
    num_actual_tokens: int
    num_decodes: int
    num_decode_tokens: int
    num_prefills: int
    num_prefill_tokens: int
    use_cascade: bool
    padded_decodes: int = 0  # > 0: a CUDA-graph decode step of this many rows
    prefill_wrapper: object = None
    decode_wrapper: object = None
    cascade_wrapper: object = None


def vllm_order(batch):
    """vLLM's reorder_batch: requests of one query token (decodes) first, then the rest, each in order."""
    return [s for s in batch if s.q_len == 1] + [s for s in batch if s.q_len > 1]


class VllmFlashInferBackend:
    def __init__(self, fi, cfg, kv_cache, device, private_replan=False):
        self.fi, self.cfg, self.kv_cache, self.device = fi, cfg, kv_cache, torch.device(device)
        self.private_replan = private_replan
        self.workspace = torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8, device=self.device)
        self._prefill_wrapper = self._decode_wrapper = self._cascade_wrapper = None
        self._decode_wrappers_cudagraph = {}
        self._graphs = {}  # padded batch size -> engine_graph.CapturedCall
        max_num_pages = cfg.max_num_reqs * cfg.max_pages_per_req
        self.paged_kv_indptr = torch.zeros(cfg.max_num_reqs + 1, dtype=I32, device=self.device)
        self.paged_kv_indices = torch.zeros(max_num_pages, dtype=I32, device=self.device)
        self.paged_kv_last_page_len = torch.zeros(cfg.max_num_reqs, dtype=I32, device=self.device)
        pin = self.device.type == "cuda"
        self.paged_kv_indptr_cpu = torch.zeros(cfg.max_num_reqs + 1, dtype=I32, pin_memory=pin)
        self.paged_kv_indptr_np = self.paged_kv_indptr_cpu.numpy()
        self.paged_kv_indptr_buffer = torch.zeros_like(self.paged_kv_indptr_cpu, pin_memory=pin)
        self.paged_kv_last_page_len_cpu = torch.zeros(cfg.max_num_reqs, dtype=I32, pin_memory=pin)
        self.paged_kv_last_page_len_np = self.paged_kv_last_page_len_cpu.numpy()
        # The model runner's fixed input / output of the CUDA-graph decode steps.
        hd = cfg.heads * cfg.head_dim
        self.static_qkv = torch.zeros(max(cfg.capture_sizes), hd + 2 * cfg.kv_heads * cfg.head_dim,
                                      dtype=cfg.dtype, device=self.device)
        self.static_query = self.static_qkv[:, :hd].view(-1, cfg.heads, cfg.head_dim)
        self.static_output = torch.zeros(max(cfg.capture_sizes), cfg.heads, cfg.head_dim, dtype=cfg.dtype,
                                         device=self.device)

    # ---- wrappers, created on first use as vLLM does ----

    def _get_prefill_wrapper(self):
        if self._prefill_wrapper is None:
            self._prefill_wrapper = self.fi.BatchPrefillWithPagedKVCacheWrapper(self.workspace, self.cfg.kv_layout)
        return self._prefill_wrapper

    def _get_decode_wrapper(self, batch_size, use_cudagraph):
        wrapper = self._decode_wrappers_cudagraph.get(batch_size) if use_cudagraph else self._decode_wrapper
        if wrapper is None:
            buffers = (dict(paged_kv_indptr_buffer=self.paged_kv_indptr[:batch_size + 1],
                            paged_kv_indices_buffer=self.paged_kv_indices,
                            paged_kv_last_page_len_buffer=self.paged_kv_last_page_len[:batch_size])
                       if use_cudagraph else dict(paged_kv_indptr_buffer=None, paged_kv_indices_buffer=None,
                                                  paged_kv_last_page_len_buffer=None))
            wrapper = self.fi.BatchDecodeWithPagedKVCacheWrapper(self.workspace, self.cfg.kv_layout,
                                                                 use_cuda_graph=use_cudagraph, use_tensor_cores=True,
                                                                 **buffers)
            if use_cudagraph:
                self._decode_wrappers_cudagraph[batch_size] = wrapper
            else:
                self._decode_wrapper = wrapper
        return wrapper

    def _get_cascade_wrapper(self):
        if self._cascade_wrapper is None:
            self._cascade_wrapper = self.fi.MultiLevelCascadeAttentionWrapper(2, self.workspace, self.cfg.kv_layout)
        return self._cascade_wrapper

    def _forget_graph(self, batch_size):
        """A CUDA-graph wrapper whose plan failed is dropped with its graph (the graph holds its old plan)."""
        self._graphs.pop(batch_size, None)
        self._decode_wrappers_cudagraph.pop(batch_size, None)

    # ---- FlashInferMetadataBuilder.build ----

    def _block_table(self, batch):
        table = torch.zeros(len(batch), self.cfg.max_pages_per_req, dtype=I32)
        for r, s in enumerate(batch):
            table[r, :len(s.pages)] = torch.tensor(s.pages, dtype=I32)
        return table.to(self.device)

    def _copy_page_indices(self, out, block_table, num_blocks):
        """vLLM's _copy_page_indices_kernel (Triton): each request's first num_blocks[r] block-table entries,
        concatenated, written on the device."""
        counts = torch.as_tensor(num_blocks, device=self.device)
        keep = torch.arange(block_table.shape[1], device=self.device)[None, :] < counts[:, None]
        out.copy_(block_table[keep])

    def build(self, batch, common_prefix_len):
        """Plans the step's wrappers. batch: Scheduled in vLLM's order (vllm_order)."""
        cfg, ps = self.cfg, self.cfg.page_size
        num_reqs = len(batch)
        num_decodes = sum(s.q_len == 1 for s in batch)
        num_prefills = num_reqs - num_decodes
        q_lens = [s.q_len for s in batch]
        qo_indptr_cpu = torch.tensor(np.concatenate([[0], np.cumsum(q_lens)]), dtype=I32)  # query_start_loc_cpu
        num_actual_tokens = int(qo_indptr_cpu[-1])
        seq_lens_np = np.array([s.kv_len for s in batch], dtype=np.int32)
        seq_lens_cpu = torch.from_numpy(seq_lens_np)
        block_table_tensor = self._block_table(batch)
        num_blocks_np = (seq_lens_np + (ps - 1)) // ps

        use_cascade = common_prefix_len > 0
        if use_cascade:
            assert common_prefix_len % ps == 0
            num_common_kv_blocks = common_prefix_len // ps
            shared_qo_indptr_cpu = torch.tensor([0, num_actual_tokens], dtype=I32)
            shared_kv_page_indptr_cpu = torch.tensor([0, num_common_kv_blocks], dtype=I32)
            shared_kv_page_indices_cpu = block_table_tensor[0, :num_common_kv_blocks]
            shared_kv_last_page_len_cpu = torch.tensor([ps], dtype=I32)
            block_table_tensor = block_table_tensor[:, num_common_kv_blocks:]
            num_blocks_np = num_blocks_np - num_common_kv_blocks

        np.cumsum(num_blocks_np, dtype=np.int32, out=self.paged_kv_indptr_np[1:num_reqs + 1])
        self.paged_kv_indptr_buffer[:num_reqs + 1] = self.paged_kv_indptr_cpu[:num_reqs + 1]
        paged_kv_indptr = self.paged_kv_indptr[:num_reqs + 1]
        paged_kv_indptr.copy_(self.paged_kv_indptr_buffer[:num_reqs + 1], non_blocking=True)
        num_actual_pages = int(self.paged_kv_indptr_np[num_reqs])
        paged_kv_indices = self.paged_kv_indices[:num_actual_pages]
        self._copy_page_indices(paged_kv_indices, block_table_tensor, num_blocks_np)
        last = seq_lens_np % ps
        self.paged_kv_last_page_len_np[:num_reqs] = np.where(last == 0, ps, last)

        meta = Metadata(num_actual_tokens, num_decodes, num_decodes, num_prefills, num_actual_tokens - num_decodes,
                        use_cascade)
        paged_kv_indptr_cpu = self.paged_kv_indptr_cpu[:1 + num_reqs]
        paged_kv_last_page_len_cpu = self.paged_kv_last_page_len_cpu[:num_reqs]
        options = dict(sm_scale=cfg.sm_scale, window_left=cfg.window_left, logits_soft_cap=cfg.logits_soft_cap,
                       q_data_type=cfg.dtype, kv_data_type=cfg.dtype)
        if use_cascade:
            meta.cascade_wrapper = self._get_cascade_wrapper()
            meta.cascade_wrapper.plan(
                [shared_qo_indptr_cpu, qo_indptr_cpu], [shared_kv_page_indptr_cpu, paged_kv_indptr_cpu],
                [shared_kv_page_indices_cpu, paged_kv_indices], [shared_kv_last_page_len_cpu,
                                                                 paged_kv_last_page_len_cpu],
                cfg.heads, cfg.kv_heads, cfg.head_dim, ps, causal=True, **options)
            return meta
        if num_prefills > 0:
            prefill_start = num_decodes
            meta.prefill_wrapper = self._get_prefill_wrapper()
            # qo_indptr rebased for query[num_decode_tokens:]; paged_kv_indptr not: it indexes paged_kv_indices.
            meta.prefill_wrapper.plan(
                qo_indptr_cpu[prefill_start:] - qo_indptr_cpu[prefill_start], paged_kv_indptr_cpu[prefill_start:],
                paged_kv_indices, paged_kv_last_page_len_cpu[prefill_start:], cfg.heads, cfg.kv_heads, cfg.head_dim,
                ps, causal=True, fixed_split_size=-1, disable_split_kv=False, **options)
        if num_decodes > 0:
            use_cudagraph = num_prefills == 0 and num_decodes <= max(cfg.capture_sizes)
            num_input_tokens = num_decodes
            if use_cudagraph:
                num_input_tokens = min(size for size in cfg.capture_sizes if size >= num_decodes)
                # Padding requests: indptr kept non-decreasing (no pages), last_page_len 1.
                self.paged_kv_indptr_cpu[1 + num_decodes:1 + num_input_tokens].fill_(paged_kv_indptr_cpu[-1])
                self.paged_kv_last_page_len_cpu[num_decodes:num_input_tokens].fill_(1)
                meta.padded_decodes = num_input_tokens
            meta.decode_wrapper = self._get_decode_wrapper(num_input_tokens, use_cudagraph)
            try:
                self.fast_plan_decode(meta.decode_wrapper, self.paged_kv_indptr_cpu[:num_input_tokens + 1],
                                      paged_kv_indices, self.paged_kv_last_page_len_cpu[:num_input_tokens],
                                      seq_lens_cpu[:num_input_tokens], **options)
            except Exception:
                if use_cudagraph:
                    self._forget_graph(num_input_tokens)
                raise
        return meta

    def fast_plan_decode(self, wrapper, indptr_cpu, indices, last_page_len_cpu, seq_lens_cpu, sm_scale, window_left,
                         logits_soft_cap, q_data_type, kv_data_type):
        """vLLM's fast_plan_decode (pos_encoding_mode NONE, fixed_split_size -1, disable_split_kv False)."""
        cfg = self.cfg
        if not wrapper.is_cuda_graph_enabled or getattr(wrapper, "vllm_first_call", True) or not self.private_replan:
            # vLLM passes these positionally in FlashInfer's pre-0.7 order (no o_data_type), which 0.7.2's
            # deprecated positional form reads differently; by keyword they mean what vLLM means.
            wrapper.plan(indptr_cpu, indices, last_page_len_cpu, cfg.heads, cfg.kv_heads, cfg.head_dim,
                         cfg.page_size, pos_encoding_mode="NONE", window_left=window_left,
                         logits_soft_cap=logits_soft_cap, q_data_type=q_data_type, kv_data_type=kv_data_type,
                         data_type=None, sm_scale=sm_scale, rope_scale=None, rope_theta=None, non_blocking=True,
                         block_tables=None, seq_lens=None, fixed_split_size=-1, disable_split_kv=False)
            wrapper.vllm_first_call = False
            return
        batch_size = len(last_page_len_cpu)
        if batch_size != wrapper._fixed_batch_size:
            raise ValueError(f"batch size {batch_size} differs from the wrapper's {wrapper._fixed_batch_size}")
        if len(indices) > len(wrapper._paged_kv_indices_buf):
            raise ValueError("the size of indices should be less than or equal to the allocated buffer")
        wrapper._paged_kv_indptr_buf.copy_(indptr_cpu, non_blocking=True)
        wrapper._paged_kv_last_page_len_buf.copy_(last_page_len_cpu, non_blocking=True)
        qo_indptr_host = importlib.import_module(self.fi.__name__ + ".decode")._get_range_buf(batch_size + 1, "cpu")
        wrapper._plan_info = wrapper._cached_module.plan(
            wrapper._float_workspace_buffer, wrapper._int_workspace_buffer,
            wrapper._pin_memory_int_workspace_buffer, qo_indptr_host, indptr_cpu, seq_lens_cpu, batch_size,
            batch_size, cfg.heads, cfg.kv_heads, cfg.page_size, wrapper.is_cuda_graph_enabled, cfg.head_dim,
            cfg.head_dim, False, window_left, -1, False)
        wrapper._pos_encoding_mode, wrapper._window_left = "NONE", window_left
        wrapper._logits_soft_cap = 0.0 if logits_soft_cap is None else logits_soft_cap
        wrapper._sm_scale, wrapper._rope_scale, wrapper._rope_theta = sm_scale, None, None

    # ---- FlashInferImpl.forward ----

    def forward(self, meta, query, output):
        """The attention calls after the KV write: query [tokens, heads, D] (a view of packed QKV rows),
        output [tokens, heads, D] written through out= slices."""
        cfg, kv_cache = self.cfg, self.kv_cache
        query = query[:meta.num_actual_tokens]
        output = output[:meta.num_actual_tokens]
        if meta.use_cascade:
            output.copy_(meta.cascade_wrapper.run(query, kv_cache))
            return
        nd = meta.num_decode_tokens
        soft_cap = cfg.logits_soft_cap or 0.0
        if meta.num_prefill_tokens > 0:
            wrapper = meta.prefill_wrapper
            assert wrapper._causal
            assert wrapper._window_left == cfg.window_left
            assert wrapper._logits_soft_cap == soft_cap
            assert wrapper._sm_scale == cfg.sm_scale
            wrapper.run(query[nd:], kv_cache, k_scale=1.0, v_scale=1.0, out=output[nd:])
        if nd > 0:
            wrapper = meta.decode_wrapper
            assert wrapper._window_left == cfg.window_left
            assert wrapper._logits_soft_cap == soft_cap
            assert wrapper._sm_scale == cfg.sm_scale
            wrapper.run(query[:nd], kv_cache, k_scale=1.0, v_scale=1.0, out=output[:nd])

    def attend(self, batch, common_prefix_len, qkv, query):
        """One step's attention: plans (build), then runs eagerly, or replays the padded batch size's CUDA graph
        (captured on its first use). qkv [tokens, ...] packed rows and query, its q view, in batch order.
        Returns o [tokens, heads, D]."""
        meta = self.build(batch, common_prefix_len)
        if not meta.padded_decodes:
            output = torch.full(tuple(query.shape), float("nan"), dtype=self.cfg.dtype, device=self.device)
            self.forward(meta, query, output)
            return output
        n, padded = query.shape[0], meta.padded_decodes
        self.static_qkv[:n].copy_(qkv)
        self.static_output[:padded].fill_(float("nan"))
        if padded not in self._graphs:
            graph_meta = replace(meta, num_actual_tokens=padded, num_decodes=padded, num_decode_tokens=padded)
            self._graphs[padded] = engine_graph.CapturedCall(
                lambda: self.forward(graph_meta, self.static_query[:padded], self.static_output[:padded]))
        self._graphs[padded].replay()
        return self.static_output[:n]
