"""The generated code's helpers are Python modules: importable without effects, equal to the engine, emitted as text."""

import ast
import copy
import dataclasses
import importlib
import pkgutil
import warnings
from importlib import resources

import pytest
import torch
import torch.nn.modules.module as module_globals
from torch import nn

from hookwidgets.core import Explorer
from hookwidgets.core.capture.stats import tensor_stats
from hookwidgets.core.codegen import templates
from hookwidgets.core.codegen.generate import RESERVED, hook_code
from hookwidgets.core.codegen.sections import MARKER, edit_names, edit_section, rename, section, unannotated
from hookwidgets.core.hooks.tensor_edits import EDIT_NAMES, apply_edits
from tests.conftest import GLOBAL_DICTS
from tests.unit.core.graph.test_scoping import mlp

NAMES = sorted(info.name for info in pkgutil.iter_modules(templates.__path__))


def _module(name: str):
    return importlib.import_module(f"{templates.__name__}.{name}")


def test_every_template_imports_without_registering_a_hook_and_emits_code_that_compiles():
    assert NAMES == [
        "dict_output",
        "edit_tensor",
        "every_module",
        "header",
        "heads",
        "hidden_edit",
        "op_nodes",
        "paths",
        "printing",
        "stats",
    ]
    before = {name: dict(getattr(module_globals, name)) for name in GLOBAL_DICTS}
    for name in NAMES:
        source = resources.files(templates).joinpath(f"{name}.py").read_text(encoding="utf-8")
        assert source.count(f"\n{MARKER}\n") == 1, name
        importlib.reload(_module(name))
        compile(section(name), f"<template {name}>", "exec")
        compile(section(name, "net"), f"<template {name}>", "exec")
    assert {name: dict(getattr(module_globals, name)) for name in GLOBAL_DICTS} == before


def _defined(source: str) -> set[str]:
    """The names a piece of module-level code binds: functions, assignment and loop targets."""
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef):
            names.add(node.name)
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.For) else []
        names |= {n.id for target in targets for n in ast.walk(target) if isinstance(n, ast.Name)}
    return names


def test_the_templates_are_typed_and_the_code_they_emit_is_plain():
    for name in NAMES:
        typed = resources.files(templates).joinpath(f"{name}.py").read_text(encoding="utf-8").partition(MARKER)[2]
        emitted = section(name)
        assert "# type: ignore" not in emitted, name
        for node in ast.walk(ast.parse(emitted)):
            assert not isinstance(node, ast.AnnAssign), name
            assert not (isinstance(node, ast.arg) and node.annotation), name
            assert not (isinstance(node, ast.FunctionDef) and node.returns), name
        # the same code, annotations aside: the statements and names of the typed module, in its order
        plain = [n for n in ast.parse(typed).body if not (isinstance(n, ast.AnnAssign) and n.value is None)]
        assert len(plain) == len(ast.parse(emitted).body), name
    assert "def _on_dict_output(hook: PreHook" in resources.files(templates).joinpath("dict_output.py").read_text()


def test_unannotated_writes_the_source_as_it_was_before_its_annotations():
    typed = (
        "def f(a: int, b: list[int] | None = None, *c: str, d: bool = True, **e: object) -> dict[\n"
        "    str, int\n"
        "]:\n"
        "    found: dict[str, int] = {}  # a comment stays\n"
        "    names: list[str]  # a declaration alone goes, with its comment\n"
        "    names, x = [], 'é'  # a non-ASCII string before nothing moves the cuts\n"
        "    t.register_hook(f)  # type: ignore[no-untyped-call]  # the reason goes too\n"
        "    return found\n"
    )
    assert unannotated(typed) == (
        "def f(a, b=None, *c, d=True, **e):\n"
        "    found = {}  # a comment stays\n"
        "    names, x = [], 'é'  # a non-ASCII string before nothing moves the cuts\n"
        "    t.register_hook(f)\n"
        "    return found\n"
    )
    with pytest.raises(ValueError, match="shares its line"):
        unannotated("x: int; y = 1\n")


def test_the_model_variable_may_not_take_a_name_any_template_defines():
    defined = set().union(*(_defined(section(name)) for name in NAMES))
    assert "_place_node_hooks" in defined and "captures" in defined and "_path" in defined
    assert defined <= RESERVED
    for taken in ("_output_nodes", "_next_sequence_nr"):
        with pytest.raises(ValueError, match="must be a Python identifier"):
            hook_code([], model_name=taken)


def test_the_model_is_renamed_where_it_is_a_variable_only():
    source = 'model(x)\nif m is model:  # the model\n    model.fc.model = "model"\n'
    assert rename(source, "model", "net") == 'net(x)\nif m is net:  # the model\n    net.fc.model = "model"\n'
    assert "module is net:" in section("op_nodes", "net") and "module is model" not in section("op_nodes", "net")
    assert "for _path, _module in net.named_modules(" in section("paths", "net")


def test_the_template_edits_are_the_engines():
    assert edit_names() == list(EDIT_NAMES)
    edits = _module("edit_tensor")
    generator = torch.Generator().manual_seed(0)
    value = {"a": (torch.randn(2, 5, 3, generator=generator), [torch.arange(4)]), "b": None}
    half = torch.tensor([70000.0, 3.0, float("inf"), float("nan")]).half()
    cases = [(("scale", 2.5),), (("clip", 0.5),), (("clip_norm", 1.0),), (("zero",),), (("ablate", (0, 3)),)]
    cases.append((("ablate", (1,)), ("scale", -1.0), ("clip_norm", 0.1)))
    for case in cases:
        for item in (value, half, torch.randn(7, generator=generator)):
            got, expected = edits._edit(item, case), apply_edits(item, case)
            flat_got, flat_expected = torch.utils._pytree.tree_leaves(got), torch.utils._pytree.tree_leaves(expected)
            assert len(flat_got) == len(flat_expected)
            for a, b in zip(flat_got, flat_expected, strict=True):
                assert a is b is None or torch.equal(a, b) or torch.allclose(a, b, equal_nan=True), case


def test_only_the_edits_hooks_use_are_emitted_in_the_templates_order():
    source = edit_section({"ablate", "clip"})
    assert 'if edit[0] == "clip":' in source and 'elif edit[0] == "ablate":' in source
    assert "scale" not in source and "clip_norm" not in source and "masked_fill" not in source
    assert source.splitlines()[-1] == "    return t"
    namespace = {"torch": torch, "dataclasses": dataclasses}
    exec(compile(source, "<edits>", "exec"), namespace)
    edit_tensor = namespace["_edit_tensor"]
    t = torch.tensor([[3.0, -2.0, 0.5]])
    assert torch.equal(edit_tensor(t, (("clip", 1.0), ("ablate", (2,)))), torch.tensor([[1.0, -1.0, 0.0]]))
    assert torch.equal(edit_tensor(t, (("scale", 2.0),)), t)  # a branch left out does nothing


@pytest.mark.parametrize(
    "values",
    [
        torch.randn(3, 50, generator=torch.Generator().manual_seed(1)),
        torch.tensor([1.0, float("nan"), float("inf"), 0.0, -2.0]),
        torch.tensor([3e30, -1e25, 2.0]),  # squares overflow float32
        torch.randn(4, 4, dtype=torch.complex64, generator=torch.Generator().manual_seed(2)),
        torch.arange(10, dtype=torch.float16),
        torch.tensor([float("nan")]),
        torch.zeros(0),
    ],
)
def test_the_template_statistics_are_the_engines(values):
    got, expected = _module("stats")._stats(values), tensor_stats(values)
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=1e-5, abs=1e-6, nan_ok=True), key


def test_op_node_code_names_the_model_by_the_variable_given():
    torch.manual_seed(0)
    model, x = mlp(), torch.randn(3, 6)
    twin = copy.deepcopy(model)
    with Explorer(model, example_inputs=x) as ex:
        ids = [n["id"] for n in ex.graph()["nodes"] if n["op"] != "AccumulateGrad"]
        for node_id in ids:
            ex.attach(node_id, "node_pre")
        source = hook_code(ex.hooks, "net", model=model)
        namespace = {"net": twin, "model": nn.Linear(6, 3)}  # a `model` beside it is another model
        exec(compile(source, "<hook_code>", "exec"), namespace)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # a node the code could not find would warn
                for net in (model, twin):
                    net(x).pow(2).sum().backward()
        finally:
            for handle in namespace["handles"]:
                handle.remove()
        for node_id in ids:
            (record,) = ex.captures[node_id]["node_pre"]
            (entry,) = namespace["captures"][(node_id, "node_pre")]
            assert list(entry) == list(record.tensors)
            for name, t in record.tensors.items():
                assert torch.equal(entry[name], t), name
