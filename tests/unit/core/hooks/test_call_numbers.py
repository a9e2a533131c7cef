"""Firings of a module called several times in one step name the forward call they belong to, for every kind."""

import threading
import warnings

import pytest
import torch
from torch import nn

from hookwidgets.core import Explorer
from hookwidgets.core.hooks import Clock
from hookwidgets.core.hooks.clock import CALL_STEPS_KEPT
from tests.conftest import hook_state


class Twice(nn.Module):
    """Calls ``l`` twice in a row, then ``fc``: ``l``'s gradients differ between its two calls."""

    def __init__(self) -> None:
        super().__init__()
        self.l, self.fc = nn.Linear(4, 4), nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.l(self.l(x)))


def expected_output_grads(model: Twice, x: torch.Tensor) -> list[torch.Tensor]:
    """The gradient of class 0's score at the output of each call of ``l``, in forward order, by hand."""
    first = model.l(x)
    second = model.l(first)
    first.retain_grad()
    second.retain_grad()
    model.fc(second)[:, 0].sum().backward()
    return [first.grad, second.grad]


def by_call(records) -> dict[int, torch.Tensor]:
    return {r.call: r.tensors.get("grad_output.0", r.tensor) for r in records}


@pytest.mark.parametrize(
    ("path", "kinds"),
    [
        ("l", ["backward_pre", "backward", "grad"]),
        ("", ["global_backward_pre", "global_backward", "global_grad"]),
    ],
)
def test_backward_kinds_number_calls_in_forward_order_like_grad(path, kinds):
    torch.manual_seed(0)
    model, x = Twice(), torch.randn(2, 4, requires_grad=True)
    expected = expected_output_grads(model, x)
    model.zero_grad(set_to_none=True)
    before = hook_state(model)
    with Explorer(model, x) as ex:
        ex.attach(path, kinds)
        ex.run(x, target=0)
        for kind in kinds:
            records = ex.captures["l"][kind]
            assert [r.call for r in records] == [1, 0], kind  # the backward reaches the second call first
            got = by_call(records)
            for call in (0, 1):
                torch.testing.assert_close(got[call], expected[call], msg=f"{kind} call {call}")
    assert hook_state(model) == before


def test_legacy_backward_numbers_calls_in_forward_order():
    torch.manual_seed(0)
    model, x = Twice(), torch.randn(2, 4, requires_grad=True)
    with Explorer(model, x) as ex, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ex.attach("l", ["legacy_backward", "grad"])
        ex.run(x, target=0)
        assert [r.call for r in ex.captures["l"]["legacy_backward"]] == [1, 0]
        assert [r.call for r in ex.captures["l"]["grad"]] == [1, 0]


def test_calls_are_numbered_per_step_over_several_steps():
    torch.manual_seed(0)
    model, x = Twice(), torch.randn(2, 4, requires_grad=True)
    with Explorer(model, x) as ex:
        ex.attach("l", ["backward_pre", "backward"])
        for _ in range(3):
            model(x).sum().backward()
        for kind in ("backward_pre", "backward"):
            assert [(r.step, r.call) for r in ex.captures["l"][kind]] == [
                (1, 1),
                (1, 0),
                (2, 1),
                (2, 0),
                (3, 1),
                (3, 0),
            ]


def test_the_clock_keeps_the_call_counters_of_the_newest_steps_only():
    clock = Clock()
    for _ in range(3 * CALL_STEPS_KEPT):
        step = clock.begin_step()
        assert [clock.next_call("l", "forward") for _ in range(2)] == [0, 1]
    assert clock.kept_steps() == list(range(step - CALL_STEPS_KEPT + 1, step + 1))  # a long loop keeps no more


def two_forwards_one_backward(model: Twice, x1: torch.Tensor, x2: torch.Tensor) -> None:
    """Two forwards of the model (steps 1 and 2), then one backward through both graphs (a summed loss)."""
    (model(x1)[:, 0].pow(2).sum() + model(x2)[:, 1].sum()).backward()


def expected_by_step(model: Twice, x1: torch.Tensor, x2: torch.Tensor) -> dict[tuple[int, int], torch.Tensor]:
    """The gradient at the output of each call of ``l`` in each step, by (step, call), by hand."""
    grads = {}
    for step, (x, score) in enumerate([(x1, lambda out: out[:, 0].pow(2).sum()), (x2, lambda out: out[:, 1].sum())]):
        outputs = [model.l(x)]
        outputs.append(model.l(outputs[0]))
        for out in outputs:
            out.retain_grad()
        score(model.fc(outputs[1])).backward()
        grads.update({(step + 1, call): out.grad for call, out in enumerate(outputs)})
    model.zero_grad(set_to_none=True)
    return grads


@pytest.mark.parametrize(
    ("path", "kinds"),
    [
        ("l", ["backward_pre", "backward", "grad"]),
        ("l", ["legacy_backward", "grad"]),  # torch refuses legacy and full backward hooks on one module
        ("", ["global_backward_pre", "global_backward", "global_grad"]),
    ],
)
def test_a_backward_through_two_forwards_names_each_gradient_by_the_step_that_made_it(path, kinds):
    torch.manual_seed(0)
    model, x1, x2 = Twice(), torch.randn(2, 4, requires_grad=True), torch.randn(2, 4, requires_grad=True)
    expected = expected_by_step(model, x1, x2)
    with Explorer(model, x1) as ex, warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # legacy_backward is kept for comparison only
        ex.attach(path, kinds)
        two_forwards_one_backward(model, x1, x2)
        for kind in kinds:
            records = ex.captures["l"][kind]
            assert sorted((r.step, r.call) for r in records) == sorted(expected), kind
            for record in records:
                got = record.tensors.get("grad_output.0", record.tensor)
                torch.testing.assert_close(got, expected[(record.step, record.call)], msg=f"{kind} {record}")
            events = [(e.step, e.call) for e in ex.timeline if e.path == "l" and e.kind == kind]
            assert events == [(r.step, r.call) for r in records], kind  # the timeline says the same


def test_a_backward_on_one_thread_takes_no_step_of_another_thread():
    # sequence numbers are per thread: a fresh thread's forward (step 2) begins at a lower number than a
    # node step 1 made on another thread, and must not claim it
    torch.manual_seed(0)
    model, x1, x2 = Twice(), torch.randn(2, 4, requires_grad=True), torch.randn(2, 4, requires_grad=True)
    expected = expected_by_step(model, x1, x2)
    losses = {}

    def in_thread(work) -> None:
        worker = threading.Thread(target=work)
        worker.start()
        worker.join()

    with Explorer(model, x1) as ex:
        ex.attach("l", ["backward_pre", "backward"])
        losses["step 1"] = model(x1)[:, 0].pow(2).sum()  # this thread: step 1, its backward comes last
        in_thread(lambda: model(x2)[:, 1].sum().backward())  # a fresh thread: step 2, forward and backward
        losses["step 1"].backward()
        for kind in ("backward_pre", "backward"):
            records = ex.captures["l"][kind]
            assert [(r.step, r.call) for r in records] == [(2, 1), (2, 0), (1, 1), (1, 0)], kind
            for record in records:
                torch.testing.assert_close(record.tensors["grad_output.0"], expected[(record.step, record.call)])


def test_a_second_backward_through_a_kept_graph_names_the_same_calls_the_model_itself_included():
    # global pre-hooks run before the step tracker: the model's own call must still be noted in its step
    torch.manual_seed(0)
    model, x = Twice(), torch.randn(2, 4, requires_grad=True)
    with Explorer(model, x) as ex:
        ex.attach("", ["global_backward_pre", "global_backward", "global_grad"])
        score = model(x).sum()
        score.backward(retain_graph=True)
        score.backward()
        for kind in ("global_backward_pre", "global_backward", "global_grad"):
            assert [(r.step, r.call) for r in ex.captures[""][kind]] == [(1, 0), (1, 0)], kind
            assert [(r.step, r.call) for r in ex.captures["l"][kind]] == [(1, 1), (1, 0), (1, 1), (1, 0)], kind


@pytest.mark.parametrize(
    ("path", "kinds"),
    [
        ("l", ["backward_pre", "backward", "grad"]),
        ("l", ["legacy_backward", "grad"]),
        ("", ["global_backward_pre", "global_backward", "global_grad"]),
    ],
)
def test_a_backward_run_by_a_worker_that_ran_forwards_of_its_own_names_the_forward_that_built_the_graph(path, kinds):
    # the worker's own step (2) began at a higher autograd number than any node of step 1, made on the main thread
    torch.manual_seed(0)
    model, x1, x2 = Twice(), torch.randn(2, 4, requires_grad=True), torch.randn(2, 4, requires_grad=True)
    expected = expected_by_step(model, x1, x2)
    with Explorer(model) as ex, warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        ex.attach(path, kinds)
        main_loss = model(x1)[:, 0].pow(2).sum()  # step 1, on this thread

        def worker() -> None:
            model(x2)[:, 1].sum().backward()  # step 2: the worker's own forward and backward
            main_loss.backward()  # then the backward of step 1

        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
        for kind in kinds:
            records = ex.captures["l"][kind]
            assert [(r.step, r.call) for r in records] == [(2, 1), (2, 0), (1, 1), (1, 0)], kind
            for record in records:
                got = record.tensors.get("grad_output.0", record.tensor)
                torch.testing.assert_close(got, expected[(record.step, record.call)], msg=f"{kind} {record}")


class Nested(nn.Module):
    """Calls itself twice over: the call at depth d (2 outermost) scales ``lin``'s output by d + 2. ``direct``:
    each call returns its inner call's output as it is, otherwise scaled by d + 5."""

    def __init__(self, direct: bool) -> None:
        super().__init__()
        self.lin, self.direct = nn.Linear(4, 4), direct

    def forward(self, x: torch.Tensor, depth: int = 2) -> torch.Tensor:
        y = self.lin(x) * (depth + 2)
        if depth == 0:
            return y
        inner = self(y, depth - 1)
        return inner if self.direct else inner * (depth + 5)


class HoldsNested(nn.Module):
    def __init__(self, direct: bool) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.nested = Nested(direct)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.nested(x))


def nested_by_hand(model: HoldsNested, x: torch.Tensor) -> dict[str, dict[int, torch.Tensor]]:
    """Each call's output, output gradient and input gradient, by its call number (the innermost is call 0)."""
    lin, direct = model.nested.lin, model.nested.direct
    x = x.detach().requires_grad_()
    inputs = {2: x}
    for depth in (2, 1):
        inputs[depth - 1] = lin(inputs[depth]) * (depth + 2)
    outputs = {0: lin(inputs[0]) * 2}
    for depth in (1, 2):
        outputs[depth] = outputs[depth - 1] if direct else outputs[depth - 1] * (depth + 5)
    for t in (*inputs.values(), *outputs.values()):
        if not t.is_leaf:
            t.retain_grad()
    torch.tanh(outputs[2]).pow(2).sum().backward()
    model.zero_grad(set_to_none=True)
    return {
        "output": {d: t.detach() for d, t in outputs.items()},
        "grad_output": {d: t.grad for d, t in outputs.items()},
        "grad_input": {d: t.grad for d, t in inputs.items()},
    }


@pytest.mark.parametrize("direct", [False, True], ids=["scaled", "returns-inner-output"])
def test_a_module_that_calls_itself_numbers_backward_firings_as_its_forward(direct):
    model, x = HoldsNested(direct), torch.randn(2, 4, requires_grad=True)
    expected = nested_by_hand(model, x)
    with Explorer(model) as ex:
        ex.attach("nested", ["forward", "backward_pre", "backward", "grad"])
        model(x).pow(2).sum().backward()
        step = ex.step
        for kind, name in [
            ("forward", "output"),
            ("backward_pre", "grad_output.0"),
            ("backward", "grad_output.0"),
            ("grad", "grad_output"),
        ]:
            records = [r for r in ex.captures["nested"][kind] if r.step == step]
            assert sorted(r.call for r in records) == [0, 1, 2], kind
            for record in records:
                want = expected["output" if kind == "forward" else "grad_output"][record.call]
                torch.testing.assert_close(record.tensors[name], want, msg=f"{kind} call {record.call}")
        for record in [r for r in ex.captures["nested"]["backward"] if r.step == step]:
            got = record.tensors["grad_input.0"]
            torch.testing.assert_close(got, expected["grad_input"][record.call], msg=f"grad_input {record.call}")
        # the firing order: backward pre-hooks outermost first, full backward hooks innermost first
        assert [r.call for r in ex.captures["nested"]["backward_pre"] if r.step == step] == [2, 1, 0]
        assert [r.call for r in ex.captures["nested"]["backward"] if r.step == step] == [0, 1, 2]


def test_legacy_backward_hooks_of_a_module_returning_its_inner_calls_output_name_each_call_once():
    # torch puts every call's legacy hook on the one node that made the innermost output
    model, x = HoldsNested(direct=True), torch.randn(2, 4, requires_grad=True)
    with Explorer(model) as ex, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ex.attach("nested", "legacy_backward")
        for _ in range(2):
            model(x).sum().backward()
        assert [(r.step, r.call) for r in ex.captures["nested"]["legacy_backward"]] == [
            (1, 0),
            (1, 1),
            (1, 2),
            (2, 0),
            (2, 1),
            (2, 2),
        ]


def test_firings_outside_a_call_of_the_model_begin_a_step_of_their_own():
    # model.forward(x) skips the model's own hooks: its modules' firings are no extra calls of the last step
    torch.manual_seed(0)
    model, x = Twice(), torch.randn(2, 4, requires_grad=True)
    with Explorer(model) as ex:
        ex.attach("l", ["forward", "backward", "grad"])
        model(x).sum().backward()  # step 1
        model.forward(x).sum().backward()  # step 2, begun by l's first firing
        model.l(x)  # still step 2: it lasts until the model's next call
        model(x).sum().backward()  # step 3
        assert ex.step == 3
        assert [(r.step, r.call) for r in ex.captures["l"]["forward"]] == [
            (1, 0),
            (1, 1),
            (2, 0),
            (2, 1),
            (2, 2),
            (3, 0),
            (3, 1),
        ]
        for kind in ("backward", "grad"):
            assert [(r.step, r.call) for r in ex.captures["l"][kind]] == [
                (1, 1),
                (1, 0),
                (2, 1),
                (2, 0),
                (3, 1),
                (3, 0),
            ]


@pytest.mark.filterwarnings("ignore:Full backward hook is firing")
def test_a_second_explorers_own_runs_add_no_step_and_no_record_to_the_first(cnn, image):
    with Explorer(cnn) as ex:
        ex.attach("features.conv", ["forward", "backward", "grad"])
        ex.attach("", "global_forward", action="stats")
        cnn(image).sum().backward()  # the user's step 1
        before = (len(ex.timeline), {k: len(v) for k, v in ex.captures["features.conv"].items()})
        with Explorer(cnn, example_inputs=image) as other:  # its shape probe
            other.attach("features.conv", "backward")  # its attach-time collision check
            other.graph()
            other.first_nonfinite()
            other.attribute(method="saliency")
            other.gradcam()
            other.compare_backward("features.conv")
            assert ex.step == 1 and other.step == 0
            assert (len(ex.timeline), {k: len(v) for k, v in ex.captures["features.conv"].items()}) == before
            other.run(image, target=0)  # the user's run: every explorer records it
            assert ex.step == 2 and other.step == 1
            assert [r.step for r in ex.captures["features.conv"]["forward"]] == [1, 2]
            assert [r.step for r in other.captures["features.conv"]["backward"]] == [1]


@pytest.mark.parametrize("kinds", [["backward_pre", "backward"], ["legacy_backward"]])
def test_a_forward_edit_attached_after_a_backward_hook_leaves_its_calls_named(kinds):
    # the edit's own node comes between the output the forward hook tagged and the node the backward runs in
    torch.manual_seed(0)
    model, x = Twice(), torch.randn(2, 4, requires_grad=True)
    with Explorer(model) as ex, warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        ex.attach("l", kinds)
        ex.attach("l", "forward", edit=("scale", 2.0))
        model(x).sum().backward()
        for kind in kinds:
            assert [(r.step, r.call) for r in ex.captures["l"][kind]] == [(1, 1), (1, 0)], kind
