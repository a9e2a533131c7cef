"""hook_code with hostile model strings: they reach the code only as literals or one-line escaped comments."""

import copy
import dataclasses

import pytest
import torch
from torch import nn

from hookwidgets.core import Explorer, HookInfo
from hookwidgets.core.codegen.generate import hook_code
from tests.unit.core.codegen.test_generate import assert_same_records, generated  # noqa: F401 (a fixture)

# torch warns that full backward hooks skip a dataclass output, which the test means to show
pytestmark = pytest.mark.filterwarnings("ignore:For backward hooks to be called:UserWarning")

# Each would run, if pasted raw into the code, and leave a global behind (torch refuses a "." in a module name).
INJECTIONS = [
    "a\nINJECTED = 1\n#",
    "b\rINJECTED = 2\r#",
    "c\u2028INJECTED = 3\u2029#",
    "d\x0bINJECTED = 4\x0c\x1c\x1d\x1e\x85#",
    'e\nexec("INJECTED_8 = 8")\n#',
    'f"""\nINJECTED = 5\n"""',
    "g'''\nINJECTED = 6\n'''",
    "h'\"quotes\"' \u202eevil",
    "i ends in a backslash\\",
]
LINE_BREAKS = "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


class Hostile(nn.Module):
    """One Linear per hostile name, in a chain; returns a dataclass whose class name is hostile too."""

    def __init__(self, output_class: type) -> None:
        super().__init__()
        torch.manual_seed(0)
        for name in INJECTIONS:
            self.add_module(name, nn.Linear(4, 4))
        self.output_class = output_class

    def forward(self, x: torch.Tensor):
        for name in INJECTIONS:
            x = torch.tanh(self._modules[name](x))
        return self.output_class(x)


def test_hostile_module_and_class_names_become_literals_and_escaped_comments(generated, tmp_path):  # noqa: F811
    pwned = tmp_path / "pwned"
    # a class name may hold anything: this one would write a file
    injected = f"Out\nINJECTED = 7\n__import__('pathlib').Path({str(pwned)!r}).touch()\n#"
    out_class = dataclasses.make_dataclass(injected, [("h", torch.Tensor)])
    model = Hostile(out_class)
    twin = copy.deepcopy(model)
    x = torch.randn(2, 4)
    ex = Explorer(model, x)
    for name in INJECTIONS:
        ex.attach(name, ["forward", "grad"])
        ex.attach(f"{name}.weight", "grad", action="stats")
    never = ex.attach("", "backward")  # on a dataclass output: never fires, and its note names the class
    # node ids hold the module names too: "<name>/AddmmBackward0#0", "<name>/AccumulateGrad#weight"
    nodes = [n["id"] for n in ex.graph()["nodes"] if n["op"] in ("AddmmBackward0", "AccumulateGrad")]
    assert len(nodes) == 3 * len(INJECTIONS)
    for node in nodes:
        ex.attach(node, "node_pre")
    ex.run(x)
    assert "dataclass" in never.note
    ex.captures.clear()  # the records to compare are the next forward's

    source = ex.code()
    assert not any(char in source for char in LINE_BREAKS)  # only "\n" ends a line
    for line in source.split("\n"):
        assert line.isprintable(), line
    namespace = generated(source, twin)
    assert not [key for key in namespace if key.startswith("INJECTED")]
    assert not pwned.exists()

    model(x).h.sum().backward()
    twin(x).h.sum().backward()
    for name in INJECTIONS:
        assert_same_records(ex, namespace["captures"], name, "forward")
        assert_same_records(ex, namespace["captures"], name, "grad")
        assert_same_records(ex, namespace["captures"], f"{name}.weight", "grad")
    for node in nodes:
        assert_same_records(ex, namespace["captures"], node, "node_pre")
    assert ("", "backward") not in namespace["captures"]  # it never fires there either
    ex.close()


def test_a_callable_named_like_a_name_the_code_uses_gets_a_name_of_its_own(generated):  # noqa: F811
    def user_hook(module, args):
        return None

    user_hook.__name__ = "ｔｏｒｃｈ"  # fullwidth letters: Python reads this identifier as `torch`
    model = nn.Sequential(nn.Linear(2, 2))
    with Explorer(model) as ex:
        ex.attach("0", "forward_pre", action=user_hook)
        ex.attach("", "global_forward")
        source = hook_code(ex.hooks)
    namespace = generated(source, model)
    assert namespace["torch"] is torch  # the placeholder did not shadow the module
    model(torch.randn(1, 2))
    assert len(namespace["captures"][("0", "global_forward")]) == 1


class Sly(str):
    """A module name whose own methods lie about its characters."""

    def __repr__(self) -> str:
        return "__import__('os')"

    def __contains__(self, item: object) -> bool:
        return False


def test_a_str_subclass_target_is_written_by_its_characters_not_by_its_own_repr(generated):  # noqa: F811
    name = 'say "hi"\nINJECTED = 1'
    model = nn.Sequential()
    model.add_module(name, nn.Linear(2, 2))
    # hook_code takes any HookInfo: a hand-made one may carry a str subclass (named_modules gives plain str)
    source = hook_code([HookInfo(Sly(name), "forward", spec="forward")])
    assert "__import__" not in source
    namespace = generated(source, model)
    model(torch.randn(1, 2))
    assert "INJECTED" not in namespace and len(namespace["captures"][(name, "forward")]) == 1
