"""attnjit.Variant without a GPU or torch: declaring params from Python values, binding them, and the refusals
(each naming what is wrong) that need no tensor. The GPU examples: test_user_variant.py."""

import pytest

import attnjit
from attnjit import AttnjitError, Status


def _library_has_variants():
    from attnjit._library import has

    try:
        return has("attnjit_variant_create")
    except AttnjitError:
        return False


needs_library = pytest.mark.skipif(not _library_has_variants(), reason="libattnjit with attnjit_variant.h not built")


# ---- no torch needed ---------------------------------------------------------------------------------------------

@needs_library
def test_declares_scalars_from_python_values_and_binds_them():
    v = attnjit.Variant(score_mod="return s * p.t + p.shift;", params={"t": 0.5, "shift": 2})
    assert v.params == [{"name": "t", "type": "f32", "rank": 0}, {"name": "shift", "type": "i32", "rank": 0}]
    v.bind(t=0.25, shift=-1)  # same kinds: fine
    with pytest.raises(AttnjitError) as e:
        v.bind(t=3)  # an int for an f32 scalar
    assert e.value.status == Status.INVALID_ARGUMENT and "'t'" in str(e.value)
    with pytest.raises(AttnjitError) as e:
        v.bind(nope=1.0)
    assert "nope" in str(e.value)


@needs_library
def test_refuses_bad_variants_naming_what_is_wrong():
    with pytest.raises(AttnjitError) as e:
        attnjit.Variant()
    assert e.value.status == Status.INVALID_ARGUMENT
    assert "score_mod" in str(e.value) and "mask_mod" in str(e.value)
    with pytest.raises(AttnjitError) as e:
        attnjit.Variant(score_mod="return s;", params={"flag": True})
    assert "params['flag']" in str(e.value)
    with pytest.raises(AttnjitError) as e:
        attnjit.Variant(score_mod="return s;", params={"bad name": 1.0})
    assert "bad name" in str(e.value)
    with pytest.raises(AttnjitError) as e:
        attnjit.Variant(score_mod=3)
    assert "score_mod" in str(e.value)
    with pytest.raises(AttnjitError) as e:
        attnjit.Variant(score_mod="return s;", params=[1.0])
    assert "params" in str(e.value)


def test_variant_argument_must_be_a_variant():
    from attnjit._variant import variant_handle

    assert variant_handle(None) is None
    with pytest.raises(AttnjitError) as e:
        variant_handle("return s;")
    assert e.value.status == Status.INVALID_ARGUMENT and "attnjit.Variant" in str(e.value)


@needs_library
def test_options_mirrors_end_with_the_variant_pointer_the_library_sizes():
    """The sized init functions write what the caller's size covers, at most the C struct: the ctypes mirrors
    must be exactly as long, or the library would not read their variant pointer (struct_size too short) or
    read past them. The unsized symbols (older callers') stop before the variant."""
    import ctypes

    from attnjit import _ctypes_types as c_types
    from attnjit._library import lib

    for struct, init in ((c_types.DecodeOptions, "attnjit_decode_options_init"),
                         (c_types.PrefillOptions, "attnjit_prefill_options_init"),
                         (c_types.BatchDecodePlanOptions, "attnjit_batch_decode_plan_options_init")):
        options = struct()
        getattr(lib(), init + "_sized")(ctypes.byref(options), ctypes.sizeof(options))
        assert options.struct_size == ctypes.sizeof(struct), struct.__name__
        # The variant ends each layout of 0.4; the prefill options grew after it (o_dtype, the fp8 scales).
        last = struct.scale_v if struct is c_types.PrefillOptions else struct.variant
        assert last.offset + ctypes.sizeof(ctypes.c_void_p) == ctypes.sizeof(struct), struct.__name__
        assert options.variant is None
        legacy = struct()
        getattr(lib(), init)(ctypes.byref(legacy))
        assert legacy.struct_size <= struct.variant.offset, struct.__name__
