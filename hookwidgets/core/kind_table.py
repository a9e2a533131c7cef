"""The hook kinds as one table: a ``Kind`` row carries every fact about a kind, and every list of kinds is read from
the table when it is needed (``names(full_backward=True)``), so adding a kind is adding a row.

In the lowest layer, with no import of the engine: the model, capture, diagnostics, hooks and widget layers all
read it. The engine's checks on kinds (``resolve_kind``, ``check_callable``) are in ``hooks/kinds.py``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    """One hook kind: where it applies, when torch runs it, and what the engine, the summary and the page do with it."""

    name: str
    """The engine's name (``param_grad`` for ``grad`` on a parameter); ``HookInfo.spec``."""
    family: str
    """The places it applies to: ``"module"``, ``"global"`` (path ``""``), ``"param"`` or ``"node"`` (an autograd
    node id)."""
    phase: str
    """``"forward"`` or ``"backward"``: the pass that fires it."""
    arity: int
    """Positional arguments of torch's hook signature."""
    signature: str
    """Torch's hook signature, shown in errors about user callables."""
    tip: str
    """What it captures and when it fires, in one line: the page's tooltip of its toggle and badges."""
    user_name: str = ""
    """The name users attach and hooks carry (``HookInfo.kind``, records, the page), when not ``name``."""
    pre: bool = False
    """Fires before its module or node runs (``*_pre``)."""
    full_backward: bool = False
    """Torch's full backward hook: torch wraps the module's outputs in views, which an in-place op on them breaks."""
    module_backward: bool = False
    """Registered in the module's own backward hooks, which torch never fires on torch.compile's wrapper."""
    editable: bool = True
    """``edit=`` may change what it sees."""
    copies: bool = False
    """Its captures are copies whatever ``copy=`` says: what it sees changes in place later (``.grad`` accumulating)."""
    armed_by_step: bool = False
    """A whole forward arms it: it says "not armed" after a forward whose output needs no grad."""
    summary: str | None = None
    """The summary columns its ``stats`` records fill: ``"act"``, ``"grad"``, or None (none)."""
    badge: str = ""
    """The module tree's badge text, when not the user's name."""
    plotted: bool = True
    """The widget's inspector draws its captures."""
    common: bool = False
    """One of the kinds most looks start with (a module's output and its gradient, a parameter's gradient): the
    inspector offers them first, the others under "More kinds"."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "user_name", self.user_name or self.name)
        object.__setattr__(self, "badge", self.badge or self.user_name)

    @property
    def gradient(self) -> bool:
        """It sees gradients (a backward kind): its captures are drawn on a diverging scale."""
        return self.phase == "backward"

    @property
    def every_layer(self) -> bool:
        """Whether "Stats on every layer" attaches it: a model-wide kind that fills the summary and that no in-place op
        can break (no full backward hook)."""
        return self.family == "global" and self.summary is not None and not self.full_backward

    @property
    def kwargs_form(self) -> bool:
        """A callable may take torch's ``with_kwargs`` form of it."""
        return self.family == "module" and self.phase == "forward"

    @property
    def parameters(self) -> str:
        """The parameters of torch's hook signature: ``"module, args"``."""
        return self.signature.removeprefix("hook(").removesuffix(")")


KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind(
            "forward_pre",
            "module",
            "forward",
            2,
            "hook(module, args)",
            "the module's inputs, before its forward runs",
            pre=True,
            badge="pre",
        ),
        Kind(
            "forward",
            "module",
            "forward",
            3,
            "hook(module, args, output)",
            "the module's output, each time its forward returns",
            summary="act",
            badge="fwd",
            common=True,
        ),
        Kind(
            "backward_pre",
            "module",
            "backward",
            2,
            "hook(module, grad_output)",
            "the gradient of the module's output, before backward goes through the module",
            pre=True,
            full_backward=True,
            module_backward=True,
        ),
        Kind(
            "backward",
            "module",
            "backward",
            3,
            "hook(module, grad_input, grad_output)",
            "the gradients of the module's inputs and output, after backward went through the module",
            full_backward=True,
            module_backward=True,
            summary="grad",
        ),
        Kind(
            "grad",
            "module",
            "backward",
            1,
            "hook(grad)",
            "the gradient of the module's output, when backward reaches it "
            "(a tensor hook: in-place ops cannot break it)",
            summary="grad",
            common=True,
        ),
        Kind(
            "legacy_backward",
            "module",
            "backward",
            3,
            "hook(module, grad_input, grad_output)",
            "torch's old backward hook: the gradients of the module's last op only (can be wrong on multi-op modules)",
            module_backward=True,
            editable=False,
        ),
        Kind(
            "global_forward_pre",
            "global",
            "forward",
            2,
            "hook(module, args)",
            "every module's inputs, before each forward of every module",
            pre=True,
        ),
        Kind(
            "global_forward",
            "global",
            "forward",
            3,
            "hook(module, args, output)",
            "every module's output, each time a forward of any module returns",
            summary="act",
        ),
        Kind(
            "global_backward_pre",
            "global",
            "backward",
            2,
            "hook(module, grad_output)",
            "the gradient of every module's output, before backward goes through each module",
            pre=True,
            full_backward=True,
            armed_by_step=True,
        ),
        Kind(
            "global_backward",
            "global",
            "backward",
            3,
            "hook(module, grad_input, grad_output)",
            "the gradients of every module's inputs and output, after backward went through each module",
            full_backward=True,
            armed_by_step=True,
            summary="grad",
        ),
        Kind(
            "global_grad",
            "global",
            "backward",
            1,
            "hook(grad)",
            "the gradient of every module's output, when backward reaches it (tensor hooks)",
            armed_by_step=True,
            summary="grad",
        ),
        Kind(
            "param_grad",
            "param",
            "backward",
            1,
            "hook(grad)",
            "the parameter's gradient, when backward computes it (before it is added to .grad)",
            user_name="grad",
            armed_by_step=True,
            summary="grad",
            common=True,
        ),
        Kind(
            "post_accumulate",
            "param",
            "backward",
            1,
            "hook(param)",
            "the parameter once its gradient was added to .grad, after each backward",
            editable=False,
            copies=True,
            armed_by_step=True,
        ),
        Kind(
            "node_pre",
            "node",
            "backward",
            1,
            "hook(grad_outputs)",
            "the gradients flowing into this autograd node, before it runs",
            pre=True,
        ),
        Kind(
            "node",
            "node",
            "backward",
            2,
            "hook(grad_inputs, grad_outputs)",
            "the gradients into and out of this autograd node, after it runs",
        ),
    )
}
"""Each hook kind's engine name → its ``Kind``, in display order (module, global, parameter and node kinds): the one
place facts about kinds are written."""


def rows(**facts: object) -> tuple[Kind, ...]:
    """The rows whose fields (or properties) equal ``facts``, in table order: ``rows(family="global")``."""
    return tuple(k for k in KINDS.values() if all(getattr(k, field) == value for field, value in facts.items()))


def names(**facts: object) -> tuple[str, ...]:
    """The engine names of ``rows(**facts)``: ``names(full_backward=True)``."""
    return tuple(k.name for k in rows(**facts))


def user_names(**facts: object) -> tuple[str, ...]:
    """The names users attach of ``rows(**facts)``, each once, in table order: ``user_names(family="param")``."""
    return tuple(dict.fromkeys(k.user_name for k in rows(**facts)))


def has(name: str, **facts: object) -> bool:
    """Whether the kind of engine name ``name`` has ``facts`` (``has(kind, family="global")``); False for a name not
    in the table (a hand-made hook's, or another library's)."""
    kind = KINDS.get(name)
    return kind is not None and all(getattr(kind, field) == value for field, value in facts.items())


def summary_columns() -> dict[str, str]:
    """The user's kind name → the summary columns (``"act"``/``"grad"``) its ``stats`` records fill."""
    return {k.user_name: k.summary for k in KINDS.values() if k.summary is not None}
