"""attnjit's FlashInfer names take FlashInfer 0.7.2's Python signatures.

The wheel's sources are read with zipfile + ast (flashinfer is never
imported, torch is not needed), attnjit's from its own source through
inspect + ast. For every function attnjit exports under a FlashInfer name,
and every public method, property and class-level alias of its wrapper
classes, the parameters must match: names, positional order, defaults,
keyword-only markers, *args and **kwargs. A name attnjit is expected to
export and does not is a failure, not a skip. Without the wheel (it sits in
../shared/peers beside the checkout) the comparisons skip, naming the path.
"""

import ast
import functools
import glob
import inspect
import os
import textwrap
import zipfile

import pytest

import attnjit

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
WHEEL_PATTERN = os.path.join(os.path.dirname(REPO), "shared", "peers", "flashinfer_python-0.7.2*.whl")

# attnjit's FlashInfer functions -> the wheel file that defines them.
FUNCTIONS = {
    "single_decode_with_kv_cache": "flashinfer/decode.py",
    "trtllm_batch_decode_with_kv_cache": "flashinfer/decode.py",
    "fast_decode_plan": "flashinfer/decode.py",
    "cudnn_batch_decode_with_kv_cache": "flashinfer/cudnn/decode.py",
    "single_prefill_with_kv_cache": "flashinfer/prefill.py",
    "merge_state": "flashinfer/cascade.py",
    "merge_state_in_place": "flashinfer/cascade.py",
    "merge_states": "flashinfer/cascade.py",
}
# Module-level aliases (functools.partial of another function).
ALIASES = {"single_prefill_with_kv_cache_return_lse": "flashinfer/prefill.py"}
# FlashInfer's page helpers: expected once attnjit/page.py exists.
PAGE_FUNCTIONS = {name: "flashinfer/page.py" for name in
                  ("append_paged_kv_cache", "get_batch_indices_positions", "get_seq_lens")}
CLASSES = {
    "BatchDecodeWithPagedKVCacheWrapper": "flashinfer/decode.py",
    "BatchPrefillWithPagedKVCacheWrapper": "flashinfer/prefill.py",
    "BatchPrefillWithRaggedKVCacheWrapper": "flashinfer/prefill.py",
    "MultiLevelCascadeAttentionWrapper": "flashinfer/cascade.py",
    "BatchDecodeWithSharedPrefixPagedKVCacheWrapper": "flashinfer/cascade.py",
    "BatchPrefillWithSharedPrefixPagedKVCacheWrapper": "flashinfer/cascade.py",
}
# Public wheel methods attnjit does not offer, and why (each is a known gap, listed so that it stays visible).
NOT_OFFERED = {}
# attnjit's own public members beside FlashInfer's.
EXTRAS = {("BatchDecodeWithPagedKVCacheWrapper", "plan_handle")} | {
    (name, "check") for name in ("BatchDecodeWithPagedKVCacheWrapper", "BatchPrefillWithPagedKVCacheWrapper",
                                 "BatchPrefillWithRaggedKVCacheWrapper", "MultiLevelCascadeAttentionWrapper",
                                 "BatchDecodeWithSharedPrefixPagedKVCacheWrapper",
                                 "BatchPrefillWithSharedPrefixPagedKVCacheWrapper")}  # device-table checks
# Exports that are attnjit's own, not FlashInfer names.
ATTNJIT_ONLY = {"AttnjitError", "Plan", "SingleDecodeWrapper", "Status", "Variant", "check_tables", "version",
                "version_number"}
# attnjit's one extra parameter beside FlashInfer's: a keyword-only `variant=None` (attnjit.Variant, user
# score_mod / mask_mod snippets), last before **kwargs, on these functions and methods only.
TAKES_VARIANT = {"single_decode_with_kv_cache", "single_prefill_with_kv_cache",
                 ("BatchDecodeWithPagedKVCacheWrapper", "plan"), ("BatchPrefillWithPagedKVCacheWrapper", "plan"),
                 ("BatchPrefillWithRaggedKVCacheWrapper", "plan")}


def _page_module_exists():
    return os.path.exists(os.path.join(os.path.dirname(attnjit.__file__), "page.py"))


@pytest.fixture(scope="module")
def wheel():
    found = sorted(glob.glob(WHEEL_PATTERN))
    if not found:
        pytest.skip(f"FlashInfer 0.7.2's wheel is not at {WHEEL_PATTERN} (../shared/peers beside the checkout)")
    with zipfile.ZipFile(found[-1]) as z:
        sources = {name: ast.parse(z.read(name).decode("utf-8")) for name in
                   set(FUNCTIONS.values()) | set(CLASSES.values()) | set(ALIASES.values()) |
                   set(PAGE_FUNCTIONS.values())}
    return sources


def _is_overload(node):
    return any(ast.unparse(d).split(".")[-1] == "overload" for d in node.decorator_list)


def render(node):
    """A FunctionDef's parameters as text: names, defaults, *args / keyword-only marker, **kwargs."""
    a = node.args
    out = []
    positional = a.posonlyargs + a.args
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    for i, (p, d) in enumerate(zip(positional, defaults)):
        out.append(p.arg + ("" if d is None else "=" + ast.unparse(d)))
        if a.posonlyargs and i == len(a.posonlyargs) - 1:
            out.append("/")
    if a.vararg:
        out.append("*" + a.vararg.arg)
    elif a.kwonlyargs:
        out.append("*")
    for p, d in zip(a.kwonlyargs, a.kw_defaults):
        out.append(p.arg + ("" if d is None else "=" + ast.unparse(d)))
    if a.kwarg:
        out.append("**" + a.kwarg.arg)
    return "(" + ", ".join(out) + ")"


def wheel_function(tree, name):
    """The last non-overload def of `name` at module level."""
    found = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name and not _is_overload(n)]
    return found[-1] if found else None


def wheel_class_members(tree, name):
    """{member: ("method" | "property", FunctionDef) or ("alias", text)} of a class's public members."""
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)
    members = {}
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and not _is_overload(node) and (
                not node.name.startswith("_") or node.name == "__init__"):
            is_property = any(ast.unparse(d) == "property" for d in node.decorator_list)
            members[node.name] = ("property" if is_property else "method", node)
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            members[node.targets[0].id] = ("alias", alias_text(node.value))
    return members, cls


def alias_text(value):
    """`plan`, or `partialmethod(run, return_lse=True)` (module prefixes dropped)."""
    if isinstance(value, ast.Name):
        return value.id
    assert isinstance(value, ast.Call), ast.unparse(value)
    func = ast.unparse(value.func).split(".")[-1]
    args = [ast.unparse(a) for a in value.args] + [f"{k.arg}={ast.unparse(k.value)}" for k in value.keywords]
    return f"{func}({', '.join(args)})"


def without_variant(node):
    """`node` (one of attnjit's FunctionDefs in TAKES_VARIANT) with its keyword-only `variant=None` taken out, or
    an assertion error when it does not end its keyword-only parameters."""
    a = node.args
    assert a.kwonlyargs and a.kwonlyargs[-1].arg == "variant", f"{node.name}: no keyword-only variant last"
    assert ast.unparse(a.kw_defaults[-1]) == "None", f"{node.name}: variant's default is not None"
    stripped = ast.FunctionDef(name=node.name, args=ast.arguments(
        posonlyargs=a.posonlyargs, args=a.args, vararg=a.vararg, kwonlyargs=a.kwonlyargs[:-1],
        kw_defaults=a.kw_defaults[:-1], kwarg=a.kwarg, defaults=a.defaults), body=node.body, decorator_list=[],
        returns=None, type_comment=None)
    return stripped


def attnjit_def(obj):
    """The FunctionDef of one of attnjit's functions, from its source."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(obj)))
    return next(n for n in tree.body if isinstance(n, ast.FunctionDef))


def attnjit_member(cls, name):
    """("method" | "property", FunctionDef) or ("alias", text) of a member of one of attnjit's classes."""
    member = inspect.getattr_static(cls, name)
    if isinstance(member, property):
        return "property", attnjit_def(member.fget)
    if isinstance(member, functools.partialmethod):
        target = next(n for n, v in vars_of(cls).items() if v is member.func)
        args = [target] + [f"{k}={v!r}" for k, v in member.keywords.items()]
        return "alias", f"partialmethod({', '.join(args)})"
    for other, value in vars_of(cls).items():
        if value is member and other != name and not other.startswith("_"):
            # An alias is the name bound second in the class body; the def keeps its own name.
            if member.__name__ == other:
                return "alias", other
    return "method", attnjit_def(member)


def vars_of(cls):
    """Every attribute of cls and its bases, nearest first."""
    merged = {}
    for klass in reversed(cls.__mro__):
        merged.update(vars(klass))
    return merged


def test_every_export_is_compared_or_attnjit_own():
    compared = set(FUNCTIONS) | set(ALIASES) | set(CLASSES) | set(PAGE_FUNCTIONS)
    assert set(attnjit.__all__) - compared - ATTNJIT_ONLY == set()


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_function_signature(wheel, name):
    theirs = wheel_function(wheel[FUNCTIONS[name]], name)
    assert theirs is not None, f"{name} is not in the wheel's {FUNCTIONS[name]}"
    assert hasattr(attnjit, name), f"attnjit does not export {name}"
    ours = attnjit_def(getattr(attnjit, name))
    assert render(without_variant(ours) if name in TAKES_VARIANT else ours) == render(theirs)


@pytest.mark.parametrize("name", sorted(PAGE_FUNCTIONS))
def test_page_function_signature(wheel, name):
    if not _page_module_exists():
        pytest.skip("attnjit/page.py (the page helpers) is not written yet")
    assert hasattr(attnjit, name), f"attnjit/page.py exists but attnjit does not export {name}"
    assert render(attnjit_def(getattr(attnjit, name))) == render(wheel_function(wheel[PAGE_FUNCTIONS[name]], name))


@pytest.mark.parametrize("name", sorted(ALIASES))
def test_module_alias(wheel, name):
    tree = wheel[ALIASES[name]]
    theirs = next(alias_text(n.value) for n in tree.body
                  if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name) and n.targets[0].id == name)
    assert hasattr(attnjit, name), f"attnjit does not export {name}"
    ours = getattr(attnjit, name)
    assert isinstance(ours, functools.partial) and not ours.args
    mine = f"partial({ours.func.__name__}{''.join(f', {k}={v!r}' for k, v in ours.keywords.items())})"
    assert mine == theirs
    assert ours.func is getattr(attnjit, ours.func.__name__)


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_class_members(wheel, name):
    assert hasattr(attnjit, name), f"attnjit does not export {name}"
    cls = getattr(attnjit, name)
    theirs, _ = wheel_class_members(wheel[CLASSES[name]], name)
    differences = []
    for member, (kind, node) in sorted(theirs.items()):
        if (name, member) in NOT_OFFERED:
            assert inspect.getattr_static(cls, member, None) is None, f"{member} is offered now: drop NOT_OFFERED"
            continue
        if inspect.getattr_static(cls, member, None) is None:
            differences.append(f"{member}: missing")
            continue
        our_kind, ours = attnjit_member(cls, member)
        if our_kind != kind:
            differences.append(f"{member}: a {our_kind} in attnjit, a {kind} in FlashInfer")
        elif kind == "alias":
            if ours != node:
                differences.append(f"{member} = {ours} in attnjit, {node} in FlashInfer")
        elif (name, member) in TAKES_VARIANT:
            if render(without_variant(ours)) != render(node):
                differences.append(f"{member}{render(ours)} in attnjit (less variant),\n  {member}{render(node)} "
                                   "in FlashInfer")
        elif render(ours) != render(node):
            differences.append(f"{member}{render(ours)} in attnjit,\n  {member}{render(node)} in FlashInfer")
    for member in sorted(vars_of(cls)):
        value = inspect.getattr_static(cls, member)
        public = not member.startswith("_") and (callable(value) or isinstance(value, (property,
                                                                                       functools.partialmethod)))
        if public and member not in theirs and (name, member) not in EXTRAS:
            differences.append(f"{member}: attnjit's alone (list it in EXTRAS if meant)")
    assert not differences, "\n".join(differences)


def test_decode_plan_legacy_positional_order_and_keywords(wheel):
    """plan(..., page_size, *deprecated_positional_args, **kwargs): the legacy positional names and _plan_impl's
    keyword set are FlashInfer's, so a positional sm_scale lands in sm_scale and an unknown keyword is a
    TypeError."""
    from attnjit import batch_decode

    tree = wheel["flashinfer/decode.py"]
    legacy = next(n for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)
                  and n.targets[0].id == "_BATCH_DECODE_PLAN_LEGACY_POS_ARGS")
    assert batch_decode._BATCH_DECODE_PLAN_LEGACY_POS_ARGS == ast.literal_eval(legacy.value)
    _, cls = wheel_class_members(tree, "BatchDecodeWithPagedKVCacheWrapper")
    theirs = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "_plan_impl")
    ours = attnjit_def(attnjit.BatchDecodeWithPagedKVCacheWrapper._plan_impl)
    assert render(ours) == render(theirs)


def test_expected_names_are_exported():
    """Needs no wheel: a FlashInfer name attnjit should export and does not fails here even where the signature
    tests skip."""
    expected = set(FUNCTIONS) | set(ALIASES) | set(CLASSES) | (set(PAGE_FUNCTIONS) if _page_module_exists() else set())
    missing = sorted(name for name in expected if name not in attnjit.__all__ or not hasattr(attnjit, name))
    assert not missing, f"attnjit does not export {missing}"
