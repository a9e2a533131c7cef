"""Every feature on architectures the other tests do not name (tests/architectures.py), against plain torch, eager
transformers and Captum, or the refusal it gives where it does not apply; the model left as found after each."""

from __future__ import annotations

import contextlib
import copy
import math
from collections.abc import Iterator
from typing import Any

import pytest
import torch
import torch.nn.modules.module as module_globals
from captum.attr import LayerIntegratedGradients
from torch import nn

from hookwidgets import HookExplorer
from hookwidgets.core import Explorer
from tests.architectures import ARCHS, HEAD_DIM, Arch
from tests.conftest import GLOBAL_DICTS, hook_state
from tests.unit.core.codegen.test_generate import assert_same_records
from tests.unit.core.hooks.test_edits_axes import zero_heads
from tests.unit.core.model.test_attention_transformers import configs_state

HEADS = [1, 3]


def _params(archs: list[Arch]) -> list[Any]:
    """``archs`` as parameters named after their architecture."""
    return [pytest.param(a, id=a.name) for a in archs]


@pytest.fixture(scope="module", autouse=True)
def one_thread() -> Iterator[None]:
    """Models this small run faster on one intra-op thread, and far faster where other processes share the cores
    (two threads then wait on each other at every op): torch's thread count, put back after the module."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def built() -> Any:
    """Each architecture's model and inputs, built once for the module (every test leaves them as found)."""
    cache: dict[str, tuple[nn.Module, Any]] = {}

    def get(arch: Arch) -> tuple[nn.Module, Any]:
        if arch.name not in cache:
            cache[arch.name] = (arch.build(), arch.inputs())
        return cache[arch.name]

    return get


def call(model: nn.Module, inputs: Any) -> Any:
    if isinstance(inputs, dict):
        return model(**inputs)
    return model(*inputs) if isinstance(inputs, tuple) else model(inputs)


def scores(output: Any) -> torch.Tensor:
    """The output's first tensor: its logits (``logits_per_image`` for a two-tower model)."""
    return output if isinstance(output, torch.Tensor) else output[0]


def first_tensor(value: Any) -> torch.Tensor | None:
    """The first tensor inside an output, in the order its fields come (what a stats record reads)."""
    if isinstance(value, torch.Tensor):
        return value
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (tuple, list)) else ()
    return next((t for t in map(first_tensor, items) if t is not None), None)


def global_hooks() -> list:
    return [list(getattr(module_globals, name, {}).items()) for name in GLOBAL_DICTS]


@contextlib.contextmanager
def left_as_found(model: nn.Module, inputs: Any) -> Iterator[None]:
    """Asserts that the block leaves the model as found: hook dicts (its own and torch's global ones), configs
    (attention implementation, output_attentions, use_cache and the rest), modes, gradients, buffers, RNG state
    and outputs."""
    with torch.no_grad():
        before = scores(call(model, inputs))
    hooks, globals_before, configs = hook_state(model), global_hooks(), configs_state(model)
    modes = [m.training for m in model.modules()]
    buffers = {name: b.clone() for name, b in model.named_buffers()}
    rng = torch.get_rng_state()
    yield
    assert torch.equal(torch.get_rng_state(), rng)
    assert hook_state(model) == hooks and global_hooks() == globals_before
    assert configs_state(model) == configs
    assert [m.training for m in model.modules()] == modes
    assert all(p.grad is None for p in model.parameters())
    assert all(torch.equal(b, buffers[name]) for name, b in model.named_buffers())
    with torch.no_grad():
        assert torch.equal(scores(call(model, inputs)), before)


def probe_parameter(model: nn.Module, arch: Arch) -> str:
    """The first parameter of the architecture's probe block."""
    return next(name for name, _ in model.named_parameters() if name.startswith(arch.probe + "."))


# --- the default run


def top_score_gradient(model: nn.Module, inputs: Any, parameter: str) -> torch.Tensor:
    """The gradient of the sum of each item's top score (at the last position of a sequence) by hand."""
    read = scores(call(model, inputs))
    read = read[:, -1] if read.dim() == 3 else read
    return torch.autograd.grad(read.max(-1).values.sum(), model.get_parameter(parameter))[0]


@pytest.mark.parametrize("arch", _params(ARCHS))
def test_the_default_run_forwards_and_backpropagates_each_items_top_score(arch, built):
    model, inputs = built(arch)
    with torch.no_grad():
        own = scores(call(model, inputs))
    read = own[:, -1] if own.dim() == 3 else own  # a sequence of scores is read at the last position
    parameter = probe_parameter(model, arch)
    expected = top_score_gradient(model, inputs, parameter)
    with left_as_found(model, inputs), HookExplorer(model, example_inputs=inputs) as ex:
        ex.attach(parameter, "grad")
        # with autograd on, some kernels differ from no_grad's in the last bits
        torch.testing.assert_close(scores(ex.run(target=None)), own, rtol=1e-4, atol=1e-5)
        assert ex.last_score is None
        torch.testing.assert_close(scores(ex.run(target="top")), own, rtol=1e-4, atol=1e-5)
        assert ex.last_score.description == arch.description
        words = {"top class": "classes", "top next token": "tokens", "top label": "labels"}
        assert ex.view.status["output"]["words"] == words[arch.description.split(" · ")[-1]]  # the run bar's words
        assert ex.last_score.classes == read.argmax(-1).tolist()
        assert float(ex.last_score.value) == pytest.approx(read.max(-1).values.sum().item(), rel=1e-5)
        torch.testing.assert_close(ex.captures.latest(parameter, "grad").tensor, expected)


# --- statistics of every module


def reference_norms(model: nn.Module, inputs: Any) -> dict[str, tuple[float, int]]:
    """Per module that ran: the norm of its outputs' first tensors over all its calls, and how many calls."""
    squares: dict[str, tuple[float, int]] = {}

    def hook(path: str) -> Any:
        def read(_module: nn.Module, _args: Any, output: Any) -> None:
            t = first_tensor(output)
            if t is not None:
                total, calls = squares.get(path, (0.0, 0))
                squares[path] = (total + t.double().square().sum().item(), calls + 1)

        return read

    handles = [m.register_forward_hook(hook(path)) for path, m in model.named_modules()]
    try:
        with torch.no_grad():
            call(model, inputs)
    finally:
        for handle in handles:
            handle.remove()
    return {path: (math.sqrt(total), calls) for path, (total, calls) in squares.items()}


@pytest.mark.parametrize("arch", _params(ARCHS))
def test_global_stats_give_one_finite_row_per_module_that_ran_with_its_norm(arch, built):
    model, inputs = built(arch)
    expected = reference_norms(model, inputs)
    with left_as_found(model, inputs), Explorer(model, inputs) as ex:
        ex.attach("", ["global_forward", "global_grad"], action="stats")
        ex.run(target="top")
        rows = ex.summary()
    assert {row["step"] for row in rows} == {1}
    acts = {row["path"]: row for row in rows if "act_norm" in row}
    assert sorted(acts) == sorted(expected)
    for path, (norm, calls) in expected.items():
        assert acts[path]["act_norm"] == pytest.approx(norm, rel=1e-5), path
        assert acts[path]["act_calls"] == calls, path
    grads = [row for row in rows if "grad_norm" in row]
    assert len(grads) > len(rows) // 2 and {row["path"] for row in grads} <= set(acts)
    assert any(row["grad_norm"] > 0 for row in grads)
    for row in rows:
        assert all(math.isfinite(v) for v in row.values() if isinstance(v, float)), row["path"]
        assert row.get("act_nan", 0) == row.get("act_inf", 0) == row.get("grad_nan", 0) == row.get("grad_inf", 0) == 0


# --- attention probabilities


def _mha_weights(mha: nn.MultiheadAttention, args: tuple, kwargs: dict) -> torch.Tensor:
    """nn.MultiheadAttention's own per-head weights for that call (its forward called directly: no hooks)."""
    kwargs = {**kwargs, "need_weights": True, "average_attn_weights": False}
    return nn.MultiheadAttention.forward(mha, *args, **kwargs)[1].detach()


def eager_attention(model: nn.Module, inputs: Any, arch: Arch) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """On a copy under eager attention: the probabilities the model returns with output_attentions=True, and the
    per-head weights of each nn.MultiheadAttention call, in execution order."""
    reference = copy.deepcopy(model)
    mha: list[torch.Tensor] = []
    for module in reference.modules():
        if isinstance(module, nn.MultiheadAttention):
            module.register_forward_hook(
                lambda m, args, kwargs, _out: mha.append(_mha_weights(m, args, kwargs)), with_kwargs=True
            )
    fast_path = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        if hasattr(reference, "set_attn_implementation"):
            reference.set_attn_implementation("eager")
            output = reference(**inputs, output_attentions=True)
        else:
            output = call(reference, inputs)
    finally:
        torch.backends.mha.set_fastpath_enabled(fast_path)
    return [t.detach() for t in arch.attentions(output)], mha


def execution_order(model: nn.Module, inputs: Any, paths: list[str]) -> list[str]:
    """The modules at ``paths`` (``path#2`` for a second call) in the order they finish in a forward."""
    order: list[str] = []
    seen: dict[str, int] = {}

    def hook(path: str) -> Any:
        def ran(*_: Any) -> None:
            seen[path] = seen.get(path, 0) + 1
            order.append(path if seen[path] == 1 else f"{path}#{seen[path]}")

        return ran

    handles = [model.get_submodule(p).register_forward_hook(hook(p)) for p in {p.split("#")[0] for p in paths}]
    try:
        with torch.no_grad():
            call(model, inputs)
    finally:
        for handle in handles:
            handle.remove()
    return [p for p in order if p in paths]


@pytest.mark.parametrize("arch", _params([a for a in ARCHS if a.attentions is not None]))
def test_attention_equals_output_attentions_under_eager_in_execution_order(arch, built):
    model, inputs = built(arch)
    with left_as_found(model, inputs), Explorer(model, inputs) as ex:
        got = ex.attention()
    returned, mha = eager_attention(model, inputs, arch)
    of_mha = [isinstance(model.get_submodule(path.split("#")[0]), nn.MultiheadAttention) for path in got]
    assert len(got) == len(returned) + len(mha) > 0
    for value, expected in zip([v for v, m in zip(got.values(), of_mha, strict=True) if not m], returned, strict=True):
        assert torch.equal(value, expected)
    for value, expected in zip([v for v, m in zip(got.values(), of_mha, strict=True) if m], mha, strict=True):
        torch.testing.assert_close(value, expected)
    assert list(got) == execution_order(model, inputs, list(got))
    assert all(v.dim() == 4 and torch.allclose(v.sum(-1), torch.ones(())) for v in got.values())


@pytest.mark.parametrize("arch", _params([a for a in ARCHS if a.attentions is None]))
def test_attention_on_a_model_without_any_says_what_it_looked_for(arch, built):
    model, inputs = built(arch)
    message = rf"found no attention in {type(model).__name__}"
    with left_as_found(model, inputs), Explorer(model, inputs) as ex, pytest.raises(ValueError, match=message):
        ex.attention()


# --- token attributions


def captum_layer_ig(model: nn.Module, inputs: dict, layer: str, classes: list[int], baseline: int, steps: int):
    """Captum's LayerIntegratedGradients on the embedding's output, summed over the hidden dimension."""
    names = [k for k in inputs if k != "input_ids"]

    def forward(ids: torch.Tensor, *others: torch.Tensor) -> torch.Tensor:
        out = scores(model(input_ids=ids, **dict(zip(names, others, strict=True))))
        return out[:, -1] if out.dim() == 3 else out

    ids = inputs["input_ids"]
    attributions = LayerIntegratedGradients(forward, model.get_submodule(layer)).attribute(
        ids,
        baselines=torch.full_like(ids, baseline),
        target=classes,
        additional_forward_args=tuple(inputs[k] for k in names),
        n_steps=steps,
        method="gausslegendre",
    )
    return attributions.sum(-1).detach()


@pytest.mark.parametrize("arch", _params([a for a in ARCHS if a.embedding is not None]))
def test_integrated_gradients_equal_captums_layer_integrated_gradients(arch, built):
    model, inputs = built(arch)
    with left_as_found(model, inputs), Explorer(model, inputs) as ex:
        got = ex.attribute(method="integrated_gradients", n_steps=8, baseline=0)
    assert got.layer == arch.embedding and got.shape == inputs["input_ids"].shape
    expected = captum_layer_ig(model, inputs, arch.embedding, got.classes, 0, 8)
    assert expected.abs().sum() > 0
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("arch", _params([a for a in ARCHS if a.embedding is None]))
def test_integrated_gradients_without_token_ids_to_attribute_are_refused(arch, built):
    model, inputs = built(arch)
    with (
        left_as_found(model, inputs),
        Explorer(model, inputs) as ex,
        pytest.raises(ValueError, match=arch.token_refusal),
    ):
        ex.attribute(method="integrated_gradients")


# --- the logit lens


@pytest.mark.parametrize("arch", _params([a for a in ARCHS if a.lens]))
def test_the_lens_reads_the_last_block_as_the_model_reads_its_output(arch, built):
    model, inputs = built(arch)
    with left_as_found(model, inputs), Explorer(model, inputs) as ex:
        lens = ex.logit_lens(top_k=3)
    with torch.no_grad():
        probs, ids = scores(call(model, inputs)).softmax(-1).topk(3)
    assert lens["layers"][-1] == "output" and len(lens["layers"]) == 3  # two blocks and the output
    for row in (-1, -2):  # the output, and the last block through the final norm and the unembedding
        assert torch.equal(lens["ids"][row], ids), lens["layers"][row]
        torch.testing.assert_close(lens["probs"][row], probs)


@pytest.mark.parametrize("arch", _params([a for a in ARCHS if not a.lens]))
def test_the_lens_on_a_model_without_an_output_embedding_asks_for_unembed(arch, built):
    model, inputs = built(arch)
    message = rf"{type(model).__name__} declares no output embedding .* pass unembed=callable"
    with left_as_found(model, inputs), Explorer(model, inputs) as ex, pytest.raises(ValueError, match=message):
        ex.logit_lens()


# --- ablate_heads


def mha_without_heads(mha: nn.MultiheadAttention, query, key, value, heads: list[int]) -> torch.Tensor:
    """nn.MultiheadAttention (batch first, no mask) written out, the heads' context slices zeroed."""
    n, e, h = query.shape[0], mha.embed_dim, mha.num_heads
    projected = zip((query, key, value), mha.in_proj_weight.chunk(3), mha.in_proj_bias.chunk(3), strict=True)
    q, k, v = (nn.functional.linear(x, w, b).reshape(n, -1, h, e // h).transpose(1, 2) for x, w, b in projected)
    weights = torch.softmax(q @ k.transpose(-2, -1) / (e // h) ** 0.5, dim=-1)
    return mha.out_proj(zero_heads((weights @ v).transpose(1, 2).reshape(n, -1, e), heads, e // h))


def by_hand(model: nn.Module, inputs: Any, arch: Arch) -> torch.Tensor:
    """The output with the heads zeroed by a plain torch hook: on the projection's input, or re-running the MHA."""
    if arch.projection == "mha":

        def rerun(mha: nn.Module, args: tuple, kwargs: dict, out: tuple) -> tuple:
            assert kwargs.get("attn_mask") is None and kwargs.get("key_padding_mask") is None
            return mha_without_heads(mha, *args[:3], HEADS), out[1]

        handle = model.get_submodule(arch.heads).register_forward_hook(rerun, with_kwargs=True)
    else:
        zero = lambda _m, args: (zero_heads(args[0], HEADS, HEAD_DIM), *args[1:])  # noqa: E731
        handle = model.get_submodule(arch.projection).register_forward_pre_hook(zero)
    try:
        with torch.no_grad():
            return scores(call(model, inputs))
    finally:
        handle.remove()


@pytest.mark.parametrize("arch", _params([a for a in ARCHS if a.projection is not None]))
def test_ablate_heads_equals_zeroing_the_heads_by_hand(arch, built):
    model, inputs = built(arch)
    with torch.no_grad():
        clean = scores(call(model, inputs))
    with left_as_found(model, inputs), Explorer(model, inputs) as ex:
        info = ex.attach(arch.heads, "forward", edit=("ablate_heads", HEADS))
        with torch.no_grad():
            edited = scores(call(model, inputs))
        assert info.fired >= 1 and info.last_error is None
    torch.testing.assert_close(edited, by_hand(model, inputs, arch), rtol=1e-5, atol=1e-6)
    assert not torch.allclose(edited, clean)


@pytest.mark.parametrize("arch", _params([a for a in ARCHS if a.projection is None]))
def test_ablate_heads_where_there_are_no_heads_is_refused_with_what_was_looked_for(arch, built):
    model, inputs = built(arch)
    message = rf"module '{arch.heads}' \({type(model.get_submodule(arch.heads)).__name__}\): {arch.heads_refusal}"
    with left_as_found(model, inputs), Explorer(model, inputs) as ex:
        with pytest.raises(ValueError, match=message):
            ex.attach(arch.heads, "forward", edit=("ablate_heads", HEADS))
        assert ex.hooks == []


# --- code()


@pytest.mark.parametrize("arch", _params(ARCHS))
def test_code_records_what_the_explorer_records(arch, built):
    model, inputs = built(arch)
    mine, twin = copy.deepcopy(model), copy.deepcopy(model)
    parameter = probe_parameter(mine, arch)
    hooks, twin_hooks, globals_before = hook_state(mine), hook_state(twin), global_hooks()
    with Explorer(mine, inputs) as ex:
        ex.attach(arch.probe, ["forward", "grad"])
        ex.attach(parameter, "grad")
        ex.attach("", "global_forward", action="stats")
        namespace = {"torch": torch, "model": twin}
        exec(compile(ex.code(), "<code>", "exec"), namespace)
        try:
            for model_ in (mine, twin):
                scores(call(model_, inputs)).sum().backward()
            for info in ex.own_hooks:  # Wav2Vec2 comes with forward hooks of its own
                assert_same_records(ex, namespace["captures"], info.target, info.kind)
        finally:
            for handle in namespace["handles"]:
                handle.remove()
    assert torch.equal(mine.get_parameter(parameter).grad, twin.get_parameter(parameter).grad)
    assert hook_state(mine) == hooks and hook_state(twin) == twin_hooks and global_hooks() == globals_before
