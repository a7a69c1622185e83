"""tent/_tent.pyi against the built module: every public name, method and property of the
native module has its stub, with the same parameter names, and the stubs name nothing
the module lacks."""

import ast
import inspect
import pathlib
import re

import tent
from tent import _tent

STUB = pathlib.Path(tent.__file__).with_name("_tent.pyi")


def stub_tree():
    return ast.parse(STUB.read_text())


def stub_names(tree):
    top, classes = set(), {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            top.add(node.name)
            members = classes.setdefault(node.name, {})
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    members[item.name] = [a.arg for a in item.args.args[1:]]
                elif isinstance(item, ast.AnnAssign):
                    members[item.target.id] = None
        elif isinstance(node, ast.FunctionDef):
            top.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            top.add(node.target.id)
    return top, classes


def native_params(method):
    """Parameter names from pybind11's signature line: 'name(self, a: T, b: T = ...) -> R'."""
    doc = (method.__doc__ or "").splitlines()[0]
    inside = doc[doc.index("(") + 1:doc.rindex(")")] if "(" in doc else ""
    names = [p.split(":")[0].strip() for p in re.split(r",\s*(?![^\[]*\])", inside) if p.strip()]
    return [n for n in names if n not in ("self", "*args")]


def test_stubs_are_installed_with_the_package():
    assert STUB.exists(), STUB
    assert STUB.with_name("py.typed").exists()


def test_every_public_name_has_a_stub_and_no_stub_is_invented():
    top, classes = stub_names(stub_tree())
    native = {n for n in dir(_tent) if not n.startswith("__") or n == "__version__"}
    native -= {"__builtins__"}
    assert native - top == set(), "names without stubs"
    assert top - native - {"_Address", "_Column", "_SegmentBuffer"} == set(), "stubs of nothing"
    for cls in ("TransferEngine", "Request"):
        members = {n for n in dir(getattr(_tent, cls)) if not n.startswith("_")}
        assert members == {n for n in classes[cls] if not n.startswith("_")}, cls


def test_method_parameters_match_the_binding():
    _, classes = stub_names(stub_tree())
    for name, params in classes["TransferEngine"].items():
        method = getattr(_tent.TransferEngine, name)
        if params is None or name.startswith("__") or isinstance(method, property):
            continue
        assert native_params(method) == params, name
