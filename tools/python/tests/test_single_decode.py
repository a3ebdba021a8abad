"""attnjit.single_decode_with_kv_cache on a GPU against a float64 reference.

Runs where torch and a CUDA device are present; skips the whole module
otherwise. Inputs are fresh random normals (never zeros); outputs are
checked finite after the allocator's free memory was poisoned with NaN, and
compared by relative error with tolerances fit to the dtype (DESIGN.md):
fp16 2e-3, bf16 1e-2, fp8 KV 2e-2. The fp8 reference dequantizes the very
same fp8 values, so storage rounding is not part of the error; the looser
bound only leaves room for a kernel that dequantizes into 16-bit registers.

The reference follows FlashInfer's semantics, written out below:
  s_j   = (q · k_j) * sm_scale                  sm_scale defaults to 1/sqrt(head_dim)
  ALiBi:     s_j += slope_h * j                 added after sm_scale. FlashInfer's decode kernel
             passes qo_idx = 0 to its bias; attnjit uses the relative distance kv_idx - (kv_len-1) (same output); softmax
             and o do not depend on that constant shift, but lse does, so we pin FlashInfer's.
  soft cap:  s_j  = cap * tanh(s_j / cap)
  window:    keep j >= kv_len-1-window_left     (window_left >= 0)
  RoPE-llama on q (position kv_len-1) and k (position j), rotate-half form,
             freq_i = 1 / (rope_scale * rope_theta^(2i/head_dim))
  o   = softmax(s) · v;  lse = logsumexp(s) / ln 2 (base 2)
  fp8: q, k and v are dequantized by q_scale, k_scale and v_scale (FlashInfer folds
       q_scale and k_scale into sm_scale and multiplies o by v_scale: the same thing).
"""

import itertools
import math

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: the GPU tests need it")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device visible to torch", allow_module_level=True)

import attnjit  # noqa: E402  (after the skips, so a CPU-only run never needs the library)
from attnjit import AttnjitError, Status  # noqa: E402
from alibi import alibi_slopes  # noqa: E402

TOLERANCE = {torch.float16: 2e-3, torch.bfloat16: 1e-2}
FP8_TOLERANCE = 2e-2
DEVICE = "cuda"


# --- the reference -----------------------------------------------------------

def rope_llama(x, positions, rope_scale, rope_theta):
    """x [..., head_dim] in float64, positions broadcastable to x[..., 0]."""
    d = x.shape[-1]
    i = torch.arange(d // 2, dtype=torch.float64, device=x.device)
    freq = 1.0 / (rope_scale * rope_theta ** (2.0 * i / d))
    angle = positions.to(torch.float64)[..., None] * freq
    cos, sin = torch.cos(angle), torch.sin(angle)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def reference(q, k, v, kv_layout="NHD", pos_encoding_mode="NONE", window_left=-1, logits_soft_cap=None,
              sm_scale=None, rope_scale=None, rope_theta=None, q_scale=None, k_scale=None, v_scale=None):
    q, k, v = q.double(), k.double(), v.double()
    if kv_layout == "HND":
        k, v = k.transpose(0, 1), v.transpose(0, 1)  # to [kv_len, num_kv_heads, head_dim]
    kv_len, num_kv_heads, head_dim = k.shape
    num_qo_heads = q.shape[0]
    q = q * (q_scale or 1.0)
    k = k * (k_scale or 1.0)
    v = v * (v_scale or 1.0)
    if pos_encoding_mode == "ROPE_LLAMA":
        rs, rt = rope_scale or 1.0, rope_theta or 1e4
        q = rope_llama(q, torch.full((num_qo_heads,), kv_len - 1, device=q.device), rs, rt)
        k = rope_llama(k, torch.arange(kv_len, device=k.device)[:, None].expand(kv_len, num_kv_heads), rs, rt)
    group = num_qo_heads // num_kv_heads
    k = k.repeat_interleave(group, dim=1)  # qo head h reads kv head h // group
    v = v.repeat_interleave(group, dim=1)

    s = torch.einsum("hd,lhd->hl", q, k) * (sm_scale if sm_scale is not None else 1.0 / math.sqrt(head_dim))
    position = torch.arange(kv_len, device=q.device, dtype=torch.float64)
    distance = position - (kv_len - 1)  # <= 0: how far behind the query each key is
    if pos_encoding_mode == "ALIBI":
        s = s + alibi_slopes(num_qo_heads)[:, None] * (position[None, :] - (kv_len - 1))  # relative to the query at kv_len - 1
    if logits_soft_cap:
        s = logits_soft_cap * torch.tanh(s / logits_soft_cap)
    if window_left >= 0:
        s = s.masked_fill((distance < -window_left)[None, :], float("-inf"))
    lse = torch.logsumexp(s, dim=-1) / math.log(2.0)
    o = torch.einsum("hl,lhd->hd", torch.softmax(s, dim=-1), v)
    return o, lse


# --- helpers -----------------------------------------------------------------

def make_inputs(num_qo_heads, num_kv_heads, head_dim, kv_len, dtype, kv_layout, seed, kv_dtype=None):
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    q = torch.randn(num_qo_heads, head_dim, generator=g, device=DEVICE).to(dtype)
    kv_shape = (kv_len, num_kv_heads, head_dim) if kv_layout == "NHD" else (num_kv_heads, kv_len, head_dim)
    k = torch.randn(kv_shape, generator=g, device=DEVICE).to(kv_dtype or dtype)
    v = torch.randn(kv_shape, generator=g, device=DEVICE).to(kv_dtype or dtype)
    return q, k, v


def poison_free_memory(q):
    """Leaves NaN in the blocks the caching allocator will hand out for o and lse."""
    torch.full(q.shape, float("nan"), dtype=q.dtype, device=q.device)
    torch.full((q.shape[0],), float("nan"), dtype=torch.float32, device=q.device)


def relative_error(actual, expected):
    return ((actual.double() - expected).norm() / expected.norm()).item()


def run_and_check(q, k, v, tol, return_lse=True, **kwargs):
    ref_kwargs = {key: value for key, value in kwargs.items() if key != "use_tensor_cores"}
    poison_free_memory(q)
    try:
        out = attnjit.single_decode_with_kv_cache(q, k, v, return_lse=return_lse, **kwargs)
    except AttnjitError as e:
        if e.status == Status.UNSUPPORTED:
            pytest.skip(f"attnjit does not support this case: {e.message}")
        raise
    torch.cuda.synchronize()
    o, lse = out if return_lse else (out, None)
    o_ref, lse_ref = reference(q, k, v, **ref_kwargs)

    assert o.shape == q.shape and o.dtype == q.dtype and o.device == q.device
    assert torch.isfinite(o).all(), "o has non-finite values (poisoned memory left unwritten?)"
    err = relative_error(o, o_ref)
    assert err <= tol, f"relative error of o {err:.2e} > {tol:.0e}"
    if return_lse:
        assert lse.shape == (q.shape[0],) and lse.dtype == torch.float32
        assert torch.isfinite(lse).all()
        lse_err = ((lse.double() - lse_ref).abs() / lse_ref.abs().clamp(min=1.0)).max().item()
        assert lse_err <= tol, f"lse error {lse_err:.2e} > {tol:.0e}"
    else:
        assert isinstance(out, torch.Tensor)


# --- the grid ------------------------------------------------------------------

GRID = list(itertools.product(["NHD", "HND"], [torch.float16, torch.bfloat16], [1, 4], [64, 128], [1, 7, 1000],
                              [False, True]))


@pytest.mark.parametrize("kv_layout, dtype, group, head_dim, kv_len, return_lse", GRID)
def test_grid(kv_layout, dtype, group, head_dim, kv_len, return_lse):
    num_kv_heads = 2
    seed = GRID.index((kv_layout, dtype, group, head_dim, kv_len, return_lse))
    q, k, v = make_inputs(num_kv_heads * group, num_kv_heads, head_dim, kv_len, dtype, kv_layout, seed)
    run_and_check(q, k, v, TOLERANCE[dtype], return_lse=return_lse, kv_layout=kv_layout)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("kv_len", [7, 1000])
@pytest.mark.parametrize("rope_scale, rope_theta", [(None, None), (2.0, 5e5)])
def test_rope_llama(dtype, kv_len, rope_scale, rope_theta):
    q, k, v = make_inputs(8, 2, 128, kv_len, dtype, "NHD", seed=101)
    run_and_check(q, k, v, TOLERANCE[dtype], pos_encoding_mode="ROPE_LLAMA", rope_scale=rope_scale,
                  rope_theta=rope_theta)


@pytest.mark.parametrize("num_qo_heads, num_kv_heads", [(8, 8), (32, 8), (12, 4)])
@pytest.mark.parametrize("kv_len", [7, 1000])
def test_alibi(num_qo_heads, num_kv_heads, kv_len):
    q, k, v = make_inputs(num_qo_heads, num_kv_heads, 128, kv_len, torch.float16, "NHD", seed=202)
    run_and_check(q, k, v, TOLERANCE[torch.float16], pos_encoding_mode="ALIBI")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("logits_soft_cap", [2.0, 30.0])
def test_logits_soft_cap(dtype, logits_soft_cap):
    q, k, v = make_inputs(8, 2, 128, 1000, dtype, "HND", seed=303)
    q = q * 3  # make the cap bite
    run_and_check(q, k, v, TOLERANCE[dtype], kv_layout="HND", logits_soft_cap=logits_soft_cap)


@pytest.mark.parametrize("window_left, kv_len", [(0, 7), (5, 7), (6, 7), (100, 1000), (999, 1000)])
def test_window_left(window_left, kv_len):
    q, k, v = make_inputs(8, 2, 64, kv_len, torch.float16, "NHD", seed=404)
    run_and_check(q, k, v, TOLERANCE[torch.float16], window_left=window_left)


def test_sm_scale_and_tensor_cores():
    q, k, v = make_inputs(32, 8, 128, 1000, torch.bfloat16, "NHD", seed=505)
    run_and_check(q, k, v, TOLERANCE[torch.bfloat16], sm_scale=0.05)
    run_and_check(q, k, v, TOLERANCE[torch.bfloat16], use_tensor_cores=True)


@pytest.mark.parametrize("fp8", ["float8_e4m3fn", "float8_e5m2"])
def test_fp8_kv_cache(fp8):
    kv_dtype = getattr(torch, fp8, None)
    if kv_dtype is None:
        pytest.skip(f"this torch has no {fp8}")
    q, k, v = make_inputs(8, 2, 128, 1000, torch.float16, "NHD", seed=606, kv_dtype=kv_dtype)
    run_and_check(q, k, v, FP8_TOLERANCE, k_scale=0.5, v_scale=2.0)


def test_strided_kv_views():
    # HND views of NHD storage: k and v are not contiguous; strides travel through DLPack.
    q, k_nhd, v_nhd = make_inputs(8, 2, 128, 1000, torch.float16, "NHD", seed=707)
    k, v = k_nhd.transpose(0, 1), v_nhd.transpose(0, 1)
    assert not k.is_contiguous()
    run_and_check(q, k, v, TOLERANCE[torch.float16], kv_layout="HND")


def test_same_inputs_same_output_across_calls():
    q, k, v = make_inputs(8, 2, 128, 1000, torch.bfloat16, "NHD", seed=808)
    first = attnjit.single_decode_with_kv_cache(q, k, v)
    second = attnjit.single_decode_with_kv_cache(q, k, v)  # the memoized plan
    torch.cuda.synchronize()
    assert torch.equal(first, second)


def test_bad_inputs_raise_with_the_library_message():
    q, k, v = make_inputs(8, 2, 128, 7, torch.float16, "NHD", seed=909)
    with pytest.raises(AttnjitError) as info:
        attnjit.single_decode_with_kv_cache(q.cpu(), k, v)
    assert info.value.status == Status.INVALID_ARGUMENT
    assert "q: device_type=1 (kDLCPU)" in info.value.message
    with pytest.raises(AttnjitError) as info:
        attnjit.single_decode_with_kv_cache(q, k, v[:, :1])
    assert "v: shape" in info.value.message
    with pytest.raises(AttnjitError) as info:
        attnjit.single_decode_with_kv_cache(q, k, v, kv_layout="BHD")
    assert "kv_layout='BHD'" in info.value.message
