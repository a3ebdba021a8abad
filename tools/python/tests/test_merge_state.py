"""merge_state, merge_state_in_place and merge_states on a GPU against a
float64 torch reference: float16 and bfloat16, head_dim 64/128/256, one and
many positions, lse a few units apart, tens apart and -inf (an empty segment),
the halves of one buffer as a and b (strided, as a cascade produces them),
a strided stack for merge_states, and the in-place mask leaving masked
positions bit for bit. lse is base 2 (FlashInfer's), compared by absolute
error. Skips without torch or a CUDA device.

Outputs are checked finite after the allocator's free memory was poisoned
with NaN, so an unwritten output cannot pass.
"""

import math

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: the GPU tests need it")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device visible to torch", allow_module_level=True)

import attnjit  # noqa: E402
from attnjit import AttnjitError, Status  # noqa: E402

DEVICE = "cuda"
# V is read and written in 16 bits and merged in float32: the output rounding dominates.
V_TOL = {torch.float16: 2e-3, torch.bfloat16: 1e-2}
LSE_TOL = 1e-4  # float32 lse of a few units to tens: exp2 / log2 in float32
DTYPES = [torch.float16, torch.bfloat16]
HEAD_DIMS = [64, 128, 256]
LN2 = math.log(2.0)


def states(shape, head_dim, dtype, seed, spread=2.0):
    """V [*shape, head_dim] in dtype and S [*shape] float32 spread over about +-2 * spread (base 2)."""
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    v = torch.randn(*shape, head_dim, generator=g, device=DEVICE).to(dtype)
    s = torch.randn(*shape, generator=g, device=DEVICE) * spread
    return v, s


def reference(vs, ss):
    """Merge of states stacked on dim 0 (vs [n, ..., D], ss [n, ...]) in float64: (V, S), S base 2."""
    s = ss.double()
    total = torch.logsumexp(s * LN2, dim=0) / LN2  # log2 sum 2^s
    weights = torch.exp2(s - total)
    return (weights[..., None] * vs.double()).sum(dim=0), total


def poison(shape, dtype):
    torch.full(shape, float("nan"), dtype=dtype, device=DEVICE)
    torch.full(shape[:-1], float("nan"), dtype=torch.float32, device=DEVICE)


def check(v, s, v_ref, s_ref, dtype):
    torch.cuda.synchronize()
    assert torch.isfinite(v).all(), "V has non-finite values (poisoned memory left unwritten?)"
    assert torch.isfinite(s).all(), "S has non-finite values"
    assert v.dtype == dtype and s.dtype == torch.float32
    assert v.shape == v_ref.shape and s.shape == s_ref.shape
    err = ((v.double() - v_ref).norm() / v_ref.norm()).item()
    assert err <= V_TOL[dtype], f"relative error of V {err:.2e} > {V_TOL[dtype]:.0e}"
    lse_err = (s.double() - s_ref).abs().max().item()
    assert lse_err <= LSE_TOL, f"absolute error of S {lse_err:.2e} > {LSE_TOL:.0e}"


@pytest.mark.parametrize("head_dim", HEAD_DIMS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("seq_len", [1, 77])
def test_merge_state(seq_len, dtype, head_dim):
    heads = 8
    v_a, s_a = states((seq_len, heads), head_dim, dtype, seed=1)
    v_b, s_b = states((seq_len, heads), head_dim, dtype, seed=2)
    v_ref, s_ref = reference(torch.stack([v_a, v_b]), torch.stack([s_a, s_b]))
    # The merge is far from either input: a kernel returning one of them fails.
    assert ((v_ref - v_a.double()).norm() / v_ref.norm()).item() > 10 * V_TOL[dtype]
    poison((seq_len, heads, head_dim), dtype)
    v, s = attnjit.merge_state(v_a, s_a, v_b, s_b)
    check(v, s, v_ref, s_ref, dtype)


def test_merge_state_with_an_empty_segment():
    # lse -inf: a segment with no keys contributes nothing, where it is on either side.
    dtype, seq_len, heads, head_dim = torch.float16, 16, 4, 128
    v_a, s_a = states((seq_len, heads), head_dim, dtype, seed=3)
    v_b, s_b = states((seq_len, heads), head_dim, dtype, seed=4)
    s_b[::3] = float("-inf")
    s_a[1::3] = float("-inf")
    v_ref, s_ref = reference(torch.stack([v_a, v_b]), torch.stack([s_a, s_b]))
    v, s = attnjit.merge_state(v_a, s_a, v_b, s_b)
    check(v, s, v_ref, s_ref, dtype)
    torch.testing.assert_close(v[::3].double(), v_a[::3].double(), rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(s[::3].double(), s_a[::3].double(), rtol=0, atol=LSE_TOL)


def test_merge_state_of_lse_tens_of_units_apart():
    # Weights of 2^-40 and less next to 1: the merge must subtract the larger lse before exponentiating.
    dtype, seq_len, heads, head_dim = torch.bfloat16, 40, 8, 256
    v_a, s_a = states((seq_len, heads), head_dim, dtype, seed=9, spread=20.0)
    v_b, s_b = states((seq_len, heads), head_dim, dtype, seed=10, spread=20.0)
    v_ref, s_ref = reference(torch.stack([v_a, v_b]), torch.stack([s_a, s_b]))
    v, s = attnjit.merge_state(v_a, s_a, v_b, s_b)
    check(v, s, v_ref, s_ref, dtype)


def test_merge_state_of_the_halves_of_one_buffer():
    # A cascade's two levels written side by side: a and b are strided views with equal strides.
    dtype, seq_len, heads, head_dim = torch.bfloat16, 33, 16, 128
    v_both, s_both = states((seq_len, 2, heads), head_dim, dtype, seed=5)
    v_a, v_b, s_a, s_b = v_both[:, 0], v_both[:, 1], s_both[:, 0], s_both[:, 1]
    assert not v_a.is_contiguous() and v_a.stride() == v_b.stride()
    v_ref, s_ref = reference(torch.stack([v_a, v_b]), torch.stack([s_a, s_b]))
    v, s = attnjit.merge_state(v_a, s_a, v_b, s_b)
    check(v, s, v_ref, s_ref, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("use_mask", [False, True], ids=["all", "masked"])
def test_merge_state_in_place(dtype, use_mask):
    seq_len, heads, head_dim = 50, 8, 128
    v, s = states((seq_len, heads), head_dim, dtype, seed=6)
    v_other, s_other = states((seq_len, heads), head_dim, dtype, seed=7)
    v_ref, s_ref = reference(torch.stack([v, v_other]), torch.stack([s, s_other]))
    v_before, s_before = v.clone(), s.clone()
    g = torch.Generator(device=DEVICE).manual_seed(8)
    mask = torch.rand(seq_len, generator=g, device=DEVICE) < 0.5 if use_mask else None
    assert attnjit.merge_state_in_place(v, s, v_other, s_other, mask=mask) is None
    torch.cuda.synchronize()
    merged = mask if use_mask else torch.ones(seq_len, dtype=torch.bool, device=DEVICE)
    assert merged.any() and (not use_mask or not merged.all())
    check(v[merged], s[merged], v_ref[merged], s_ref[merged], dtype)
    # Positions the mask leaves out keep their bits.
    assert torch.equal(v[~merged], v_before[~merged]) and torch.equal(s[~merged], s_before[~merged])


@pytest.mark.parametrize("head_dim", HEAD_DIMS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("num_states", [1, 3, 17])
def test_merge_states(num_states, dtype, head_dim):
    seq_len, heads = 9, 8
    v_in, s_in = states((seq_len, num_states, heads), head_dim, dtype, seed=10 + num_states)
    v_ref, s_ref = reference(v_in.transpose(0, 1), s_in.transpose(0, 1))
    poison((seq_len, heads, head_dim), dtype)
    v, s = attnjit.merge_states(v_in, s_in)
    check(v, s, v_ref, s_ref, dtype)


def test_merge_states_of_a_strided_stack():
    # Every other state of a wider stack: strides the kernel must follow rather than assume.
    dtype, seq_len, num_states, heads, head_dim = torch.float16, 12, 5, 4, 64
    v_wide, s_wide = states((seq_len, 2 * num_states, heads), head_dim, dtype, seed=20)
    v_in, s_in = v_wide[:, ::2], s_wide[:, ::2]
    assert not v_in.is_contiguous()
    v_ref, s_ref = reference(v_in.transpose(0, 1), s_in.transpose(0, 1))
    v, s = attnjit.merge_states(v_in, s_in)
    check(v, s, v_ref, s_ref, dtype)


def test_wrong_inputs_raise_with_the_library_message():
    v_a, s_a = states((4, 8), 128, torch.float16, seed=30)
    v_b, s_b = states((4, 8), 128, torch.float16, seed=31)
    with pytest.raises(AttnjitError) as info:
        attnjit.merge_state(v_a, s_a, v_b.transpose(0, 1).contiguous().transpose(0, 1), s_b)
    assert info.value.status == Status.INVALID_ARGUMENT and "v_b: strides differ from v_a's" in info.value.message
    with pytest.raises(AttnjitError, match="s_a: dtype must be float32"):
        attnjit.merge_state(v_a, s_a.half(), v_b, s_b)
    with pytest.raises(AttnjitError) as info:
        attnjit.merge_state(v_a[..., :96].contiguous(), s_a, v_b[..., :96].contiguous(), s_b)
    assert info.value.status == Status.UNSUPPORTED and "head_dim=96 is not supported" in info.value.message
    with pytest.raises(AttnjitError, match="mask: device cpu is not allowed"):
        attnjit.merge_state_in_place(v_a, s_a, v_b, s_b, mask=torch.ones(4, dtype=torch.bool))
