"""How generate()'s decode steps keep one plan while the cache grows (integrations/transformers/_capacity.py),
without torch, transformers or a GPU: the capacity a plan is made for, what each call of a step must do
first (plan, write its length, launch with or without PDL), and the strides K/V are read with in place.

The module is loaded from its file: importing the package registers with transformers, which this test
does not need. The GPU side (the same logic driving real plans and launches) is in
test_transformers_integration.py.
"""

import importlib.util
import os

import pytest


def _load_capacity():
    package = importlib.util.find_spec("attnjit")
    path = os.path.join(os.path.dirname(package.origin), "integrations", "transformers", "_capacity.py")
    spec = importlib.util.spec_from_file_location("attnjit_transformers_capacity", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


cap = _load_capacity()


# --- the capacity a plan is made for ---

def test_capacity_covers_kv_len_in_whole_granules():
    previous = 0
    for kv_len in range(1, 20000):
        c = cap.capacity(kv_len)
        assert c >= kv_len and c % cap.GRANULE == 0, kv_len
        assert c - kv_len < cap.GRANULE, (kv_len, c)  # less than a tile of rows past the end
        assert cap.capacity(c) == c, kv_len  # a capacity is its own: planning for it again changes nothing
        assert c >= previous, kv_len  # the keys only grow: so do the capacities
        previous = c


def test_a_generate_run_plans_every_64_steps():
    # Llama-3-8B's benchmark: 1k-token prompts, 256 new tokens (decode steps over 1025 to 1279 keys)
    assert len({cap.capacity(n) for n in range(1025, 1024 + 256)}) == 4
    assert [cap.capacity(n) for n in (1, 64, 65, 512, 513, 1024, 1025, 1152, 1153, 4097)] == \
        [64, 64, 128, 512, 576, 1024, 1088, 1152, 1216, 4160]


@pytest.mark.parametrize("bad", [0, -3, True, 2.0, "8", None])
def test_capacity_refuses_what_is_not_a_key_count(bad):
    with pytest.raises(ValueError, match="kv_len=.* is not allowed; allowed: an int >= 1"):
        cap.capacity(bad)


# --- what each call does first ---

KEPT = cap.Call(None, False, True)


def steps(state, lengths, layers):
    """Calls of `layers` layers per step, as generate() makes them: a list per step of each layer's Call."""
    return [[state.call(kv_len) for _ in range(layers)] for kv_len in lengths]


def test_a_step_within_the_capacity_is_one_write_by_its_first_layer():
    state = cap.LengthState()
    lengths = range(1025, 1025 + 250)
    calls = steps(state, lengths, layers=32)
    plans = [c.plan_capacity for step in calls for c in step if c.plan_capacity is not None]
    assert plans == [1088, 1152, 1216, 1280]  # once per capacity, never per layer or per step
    for kv_len, step in zip(lengths, calls):
        assert step[0].write_length, kv_len  # the step's new length, written once ...
        assert all(c == KEPT for c in step[1:]), kv_len  # ... and the other layers only launch
    # PDL stays on except right after a plan, whose table leaves the capacity (more than kv_len) on the device
    no_pdl = [kv_len for kv_len, step in zip(lengths, calls) if not step[0].pdl]
    assert no_pdl == [1025, 1089, 1153, 1217]


def test_first_call_plans_then_writes_unless_kv_len_is_the_capacity():
    assert cap.LengthState().call(100) == cap.Call(128, True, False)
    assert cap.LengthState().call(128) == cap.Call(128, False, True)  # the plan's table already says 128
    state = cap.LengthState()
    state.call(128)
    assert state.call(128) == KEPT


def test_a_shorter_length_within_the_capacity_goes_without_pdl():
    state = cap.LengthState()
    state.call(1100)
    assert state.call(1101) == cap.Call(None, True, True)
    # a new generate() with a shorter prompt, same capacity: no plan, but the device still says 1101
    assert state.call(1090) == cap.Call(None, True, False)
    assert state.call(1091) == cap.Call(None, True, True)


def test_a_shorter_length_below_the_capacity_plans_again():
    state = cap.LengthState()
    state.call(3000)
    assert state.call(1000) == cap.Call(1024, True, False)
    assert state.call(3000) == cap.Call(3008, True, False)


def test_a_plan_that_raised_is_made_again():
    state = cap.LengthState()
    assert state.call(300).plan_capacity == 320
    state.forget()
    assert state.call(300) == cap.Call(320, True, False)


def test_a_sliding_layers_constant_length_never_writes_again():
    state = cap.LengthState()
    calls = steps(state, [4096] * 10, layers=4)
    assert calls[0][0] == cap.Call(4096, False, True)
    assert all(c == KEPT for step in calls for c in step[1:]) and all(step[0] == KEPT for step in calls[1:])


# --- K/V read in place ---

def test_page_strides_of_the_layouts_transformers_hands_over():
    b, h, n, d = 4, 8, 37, 128
    contiguous = cap.contiguous_strides((b, h, n, d))
    assert contiguous == (h * n * d, n * d, d, 1)
    assert cap.page_strides((b, h, n, d), contiguous, 2) == contiguous  # the DynamicCache's torch.cat output
    nhd_storage = (n * h * d, d, h * d, 1)  # a projection's [b, n, h, d].transpose(1, 2)
    assert cap.page_strides((b, h, n, d), nhd_storage, 2) == nhd_storage
    expanded = (0, n * d, d, 1)  # one request's keys for every request
    assert cap.page_strides((b, h, n, d), expanded, 2) == expanded
    wide = ((n + 5) * h * d, (n + 5) * d, d, 1)  # a slice of a longer cache
    assert cap.page_strides((b, h, n, d), wide, 2) == wide


def test_page_strides_give_one_key_an_aligned_key_stride():
    assert cap.page_strides((2, 8, 1, 64), (512, 64, 3, 1), 2) == (512, 64, 64, 1)
    assert cap.page_strides((1, 1, 5, 64), (7, 3, 64, 1), 2) == (7, 3, 64, 1)  # size-1 dims: not followed


def test_page_strides_refuse_what_the_kernels_cannot_read_in_place():
    assert cap.page_strides((2, 8, 9, 64), (8 * 9 * 64, 9 * 64, 64, 2), 2) is None  # head_dim not contiguous
    assert cap.page_strides((2, 8, 9, 64), (8 * 9 * 68 + 4, 9 * 68, 68, 1), 2) is None  # a batch stride off 16 B
    assert cap.page_strides((2, 8, 9, 4), cap.contiguous_strides((2, 8, 9, 4)), 2) is None  # 8-byte rows
    assert cap.page_strides((2, 8, 9, 4), cap.contiguous_strides((2, 8, 9, 4)), 4) is not None  # 16-byte rows
