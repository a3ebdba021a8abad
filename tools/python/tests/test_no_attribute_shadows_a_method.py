"""An instance attribute named like a method of the same class hierarchy replaces the method at run time (a
plan handle called `_plan` once hid `_plan()`, a byte count `_workspace_size` hid `_workspace_size()`); the
wrappers only run on a GPU, so this reads the package's source instead and fails on any such name."""

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "attnjit"


def _classes():
    classes = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                methods = {f.name for f in node.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
                assigned = {t.attr for f in ast.walk(node) if isinstance(f, (ast.Assign, ast.AugAssign, ast.AnnAssign))
                            for t in (f.targets if isinstance(f, ast.Assign) else [f.target])
                            for t in ast.walk(t)
                            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"}
                bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases]
                classes[node.name] = (methods, assigned, bases, path.name)
    return classes


def _hierarchy(classes, name, seen=None):
    seen = set() if seen is None else seen
    if name in seen or name not in classes:
        return seen
    seen.add(name)
    for base in classes[name][2]:
        _hierarchy(classes, base, seen)
    return seen


def test_no_instance_attribute_shadows_a_method():
    classes = _classes()
    clashes = []
    for name, (_, assigned, _, path) in classes.items():
        family = _hierarchy(classes, name)
        # Subclasses' methods count too: a base's attribute would hide them as well.
        family |= {other for other in classes if name in _hierarchy(classes, other)}
        methods = set().union(*(classes[c][0] for c in family))
        clashes += [f"{path}: {name}.{attr}" for attr in sorted(assigned & methods)]
    assert not clashes, f"instance attributes that replace a method: {clashes}"
