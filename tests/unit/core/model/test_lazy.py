"""Lazy modules: the probe and attach leave them as they are; a run the user asks for materializes them and says so."""

import warnings

import pytest
import torch
from torch import nn

from hookwidgets.core import Explorer, build_tree, probe
from hookwidgets.core.model.preserved_state import preserved_state
from tests.conftest import hook_state


def lazy_net() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.LazyConv2d(4, 3), nn.LazyBatchNorm2d(), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.LazyLinear(2)
    )


IMAGES = torch.randn(2, 3, 6, 6)
LAZY_CLASSES = ["LazyConv2d", "LazyBatchNorm2d", "ReLU", "AdaptiveAvgPool2d", "Flatten", "LazyLinear"]


def classes(model: nn.Module) -> list[str]:
    return [type(m).__name__ for m in model.children()]


def test_the_explorer_shows_a_lazy_model_with_shapes_and_unknown_counts_and_leaves_it_lazy():
    model = lazy_net()
    hooks_before = hook_state(model)
    torch.manual_seed(7)
    rng_before = torch.get_rng_state()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the probe neither fails nor materializes
        ex = Explorer(model, example_inputs=IMAGES)
    assert ex.probe_error is None
    assert classes(model) == LAZY_CLASSES and model[0].has_uninitialized_params()
    assert hook_state(model) == hooks_before and torch.equal(torch.get_rng_state(), rng_before)
    tree = ex.tree
    assert [(c["cls"], c["trainable"], c["frozen"], c["shape"]) for c in tree["children"]] == [
        ("LazyConv2d", None, 0, [2, 4, 4, 4]),
        ("LazyBatchNorm2d", None, 0, [2, 4, 4, 4]),
        ("ReLU", 0, 0, [2, 4, 4, 4]),
        ("AdaptiveAvgPool2d", 0, 0, [2, 4, 1, 1]),
        ("Flatten", 0, 0, [2, 4]),
        ("LazyLinear", None, 0, [2, 2]),
    ]
    assert tree["trainable"] is None and tree["shape"] == [2, 2]  # a sum with unknown terms is unknown
    # the model's own first forward, after the explorer, materializes it as it would have without one
    twin = lazy_net()
    torch.manual_seed(3)
    model(IMAGES)
    torch.manual_seed(3)
    twin(IMAGES)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), twin.state_dict().values(), strict=True))
    assert ex.tree["trainable"] == 4 * 3 * 9 + 4 + 2 * 4 + 2 * 4 + 2  # counts follow once it is materialized
    ex.close()


def test_a_frozen_lazy_parameter_makes_the_frozen_count_unknown():
    model = nn.Sequential(nn.LazyLinear(3), nn.Linear(3, 2))
    model[0].weight.requires_grad = False
    tree = build_tree(model)
    assert (tree["trainable"], tree["frozen"]) == (None, None)  # the lazy bias trains, the lazy weight is frozen
    assert (tree["children"][1]["trainable"], tree["children"][1]["frozen"]) == (8, 0)


def test_probe_of_a_lazy_model_names_the_modules_it_ran_as_the_models_own():
    model = lazy_net()
    result = probe(model, IMAGES)
    assert result.called == {id(m) for m in model.modules()}
    assert result.shapes["5"] == [2, 2] and classes(model) == LAZY_CLASSES


def test_preserved_state_restores_buffers_around_an_unmaterialized_one():
    model = lazy_net()
    with preserved_state(model, mode="train"), torch.no_grad():
        model(IMAGES)  # materializes the BatchNorm's buffers, then updates them from the batch
    assert model[1].num_batches_tracked.item() == 0  # a materialized buffer keeps its restored value


@pytest.mark.parametrize(
    ("call", "caller"),
    [
        (lambda ex: ex.run(target=0, train=True), "run()"),
        (lambda ex: ex.graph(), "graph()"),
        (lambda ex: ex.first_nonfinite(), "first_nonfinite()"),
        (lambda ex: ex.attribute(target=0, method="saliency"), "the attribution run"),
        (lambda ex: ex.compare_backward("5"), "compare_backward()"),
    ],
)
def test_a_run_the_user_asks_for_materializes_the_lazy_modules_and_says_so(call, caller):
    model = lazy_net()
    ex = Explorer(model, example_inputs=IMAGES)
    ex.attach("5", "forward")
    with pytest.warns(UserWarning, match="materialized the lazy modules") as caught:
        call(ex)
    (text,) = [str(w.message) for w in caught if "materialized" in str(w.message)]
    assert text.startswith(f"{caller} materialized the lazy modules '0' (LazyConv2d, now Conv2d), ")
    assert "'5' (LazyLinear, now Linear)" in text and "inputs Tensor(2, 3, 6, 6)" in text
    assert classes(model) == ["Conv2d", "BatchNorm2d", "ReLU", "AdaptiveAvgPool2d", "Flatten", "Linear"]
    assert ex.tree["children"][5]["trainable"] == 10 and ex.tree["children"][0]["cls"] == "Conv2d"
    # the materializing forward is the explorer's own: buffers at their first values, the user's hook unfired there
    assert torch.equal(model[1].running_mean, torch.zeros(4)) and model[1].num_batches_tracked.item() == 0
    assert ex.hooks[0].fired == (1 if caller == "run()" else 0)
    ex.close()


def test_attach_leaves_lazy_modules_unmaterialized_and_refuses_their_parameters_until_a_run():
    model = lazy_net()
    ex = Explorer(model, example_inputs=IMAGES)
    ex.attach("5", ["forward", "backward"])  # with example inputs a full backward hook is checked by a run
    ex.attach("5/AddmmBackward0#0", "node")  # and a node id against a recorded graph
    assert classes(model) == LAZY_CLASSES
    for kind in ("grad", "post_accumulate"):
        with pytest.raises(ValueError, match=r"parameter '5.weight' is not materialized yet: .* run one first"):
            ex.attach("5.weight", kind)
    with pytest.warns(UserWarning, match="run\\(\\) materialized"):
        ex.run(target=0)
    ex.attach("5.weight", "grad", "stats")
    ex.run(target=0)
    assert ex.captures["5.weight"]["grad"][-1].stats["numel"] == 8
    assert [(h.target, h.kind, h.fired) for h in ex.hooks] == [
        ("5", "forward", 2),
        ("5", "backward", 2),
        ("5/AddmmBackward0#0", "node", 2),
        ("5.weight", "grad", 1),
    ]
    ex.close()
    twin = lazy_net()
    twin(IMAGES)
    assert hook_state(model) == hook_state(twin)  # as a model its own forward materialized: torch's hooks gone too


def test_a_materializing_run_leaves_the_random_stream_where_the_models_own_first_forward_would():
    """The weights take the draws a plain first forward takes, and the user's next draws follow them."""
    model, twin = lazy_net(), lazy_net()
    ex = Explorer(model, example_inputs=IMAGES)
    torch.manual_seed(11)
    with pytest.warns(UserWarning, match="materialized the lazy modules"):
        ex.run()
    after_run = torch.rand(6)
    torch.manual_seed(11)
    with torch.no_grad():
        twin.eval()(IMAGES)
    after_own_forward = torch.rand(6)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), twin.state_dict().values(), strict=True))
    assert torch.equal(after_run, after_own_forward)  # not a repeat of the draws that made the weights
    torch.manual_seed(11)
    assert not torch.equal(after_run, torch.rand(6))
    ex.close()


def test_a_lazy_modules_own_initialization_hook_is_not_listed_as_someone_elses():
    model = lazy_net()
    model[2].register_forward_pre_hook(lambda module, args: None)  # a hook a user attached, on the ReLU
    ex = Explorer(model, example_inputs=IMAGES)
    foreign = [(h.target, h.kind) for h in ex.hooks if h.foreign]
    assert foreign == [("2", "forward_pre")]  # not '0', '1', '5': torch's lazy modules hook themselves
    assert len(model[0]._forward_pre_hooks) == 1  # that hook is there, and left alone
    ex.close()
