"""Optimizer step hooks: the update-to-weight ratio ‖Δw‖/‖w‖ of every parameter at every step."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from typing import Any, overload

import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
from torch.utils.hooks import RemovableHandle

SCOPES = ("local", "global")


class UpdateRatioMonitor:
    """Records ‖w_after − w_before‖ / ‖w_before‖ per parameter per optimizer step, through step hooks.

    ``scope="local"`` registers ``register_step_pre_hook``/``post_hook`` on each given optimizer;
    ``scope="global"`` registers torch's global step hooks and keeps only the given optimizers, or,
    with ``optimizers=None``, every optimizer that steps a parameter of ``model`` (one created later
    by a training library included). ``every=N`` measures one step in N: each measured step keeps a
    copy of the parameters that have a gradient until the step is done.
    """

    def __init__(
        self,
        optimizers: torch.optim.Optimizer | Iterable[torch.optim.Optimizer] | None = None,
        model: nn.Module | None = None,
        *,
        scope: str = "local",
        every: int = 1,
    ) -> None:
        if scope not in SCOPES:
            raise ValueError(f"scope must be one of {SCOPES}, got {scope!r}")
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"every must be a positive int (measure one step in N), got {every!r}")
        self._optimizers = _as_optimizers(optimizers)
        if not self._optimizers and model is None:
            raise ValueError(
                "UpdateRatioMonitor needs optimizers=, or model= with scope='global' to watch every optimizer of it"
            )
        if not self._optimizers and scope == "local":
            raise ValueError("scope='local' hooks need the optimizers: pass optimizers=, or use scope='global'")
        if model is not None and not isinstance(model, nn.Module):
            raise TypeError(f"model must be a torch.nn.Module (for parameter names), got {type(model).__name__}")
        self.scope, self.every = scope, every
        """``scope`` and ``every`` as given."""
        self.records: list[dict[str, Any]] = []
        """One dict per parameter per measured step: ``step``, ``optimizer`` (index into ``optimizers``), ``group``,
        ``param``, ``lr``, ``update_norm``, ``weight_norm``, ``ratio``."""
        self._names = {id(p): name for name, p in model.named_parameters()} if model is not None else {}
        self._seen: list[torch.optim.Optimizer] = list(self._optimizers)  # index = record["optimizer"]
        self._steps: dict[int, int] = {}
        self._before: dict[int, list[tuple[torch.Tensor, torch.Tensor]]] = {}
        handles = self._register()
        # The hooks hold this monitor weakly; the finalizer removes them if it is dropped unclosed.
        self._finalizer = weakref.finalize(self, _remove, handles)

    def _register(self) -> list[RemovableHandle]:
        pre, post = _weak_hook(self._pre), _weak_hook(self._post)
        if self.scope == "global":
            return [register_optimizer_step_pre_hook(pre), register_optimizer_step_post_hook(post)]
        handles = []
        for opt in self._optimizers:
            handles += [opt.register_step_pre_hook(pre), opt.register_step_post_hook(post)]
        return handles

    @property
    def optimizers(self) -> list[torch.optim.Optimizer]:
        """The optimizers seen so far; ``record["optimizer"]`` indexes this list."""
        return list(self._seen)

    def _watches(self, opt: torch.optim.Optimizer) -> bool:
        if any(opt is o for o in self._seen):
            return True
        if self._optimizers or not any(id(p) in self._names for g in opt.param_groups for p in g["params"]):
            return False
        self._seen.append(opt)
        return True

    def _pre(self, opt: torch.optim.Optimizer) -> None:
        if not self._watches(opt):
            return
        step = self._steps.get(id(opt), 0)
        if step % self.every:
            return
        with torch.no_grad():
            self._before[id(opt)] = [
                (p, p.detach().clone()) for g in opt.param_groups for p in g["params"] if p.grad is not None
            ]

    def _post(self, opt: torch.optim.Optimizer) -> None:
        if not self._watches(opt):
            return
        step = self._steps.get(id(opt), 0)
        self._steps[id(opt)] = step + 1
        pairs = self._before.pop(id(opt), None)
        if not pairs:
            return
        with torch.no_grad():
            update = _norms([p.detach() - old for p, old in pairs])
            weight = _norms([old for _, old in pairs])
        index = next(i for i, o in enumerate(self._seen) if o is opt)
        lrs = {id(p): (g_index, g.get("lr")) for g_index, g in enumerate(opt.param_groups) for p in g["params"]}
        for (p, _), u, w in zip(pairs, update, weight, strict=True):
            group, lr = lrs[id(p)]
            self.records.append(
                {
                    "step": step,
                    "optimizer": index,
                    "group": group,
                    "param": self._name(opt, p),
                    "lr": float(lr) if isinstance(lr, (int, float, torch.Tensor)) else None,
                    "update_norm": u,
                    "weight_norm": w,
                    "ratio": u / w if w > 0 else float("nan"),  # undefined for an all-zero weight
                }
            )

    def _name(self, opt: torch.optim.Optimizer, p: torch.Tensor) -> str:
        if id(p) in self._names:
            return self._names[id(p)]
        for g_index, group in enumerate(opt.param_groups):
            for p_index, q in enumerate(group["params"]):
                if q is p:
                    return f"param_groups[{g_index}][{p_index}]"
        return "?"

    def latest(self) -> dict[str, float]:
        """Parameter name → its ratio at the newest measured step (of any optimizer)."""
        return {r["param"]: r["ratio"] for r in self.records}

    def close(self) -> None:
        """Remove the step hooks; the optimizers' and torch's global hook dicts are as before."""
        self._finalizer()
        self._before.clear()

    def __enter__(self) -> UpdateRatioMonitor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if not self._finalizer.alive else f"{len(self.records)} records"
        return f"<UpdateRatioMonitor ({self.scope}) of {len(self._seen)} optimizer(s): {state}>"


def _as_optimizers(optimizers: Any) -> list[torch.optim.Optimizer]:
    if optimizers is None:
        return []
    if isinstance(optimizers, nn.Module):
        raise TypeError(
            f"the first argument is the optimizer(s), got the model {type(optimizers).__name__}: "
            "pass UpdateRatioMonitor(optimizer, model), or UpdateRatioMonitor(model=model, scope='global')"
        )
    found = [optimizers] if isinstance(optimizers, torch.optim.Optimizer) else list(optimizers)
    for opt in found:
        if not isinstance(opt, torch.optim.Optimizer):
            raise TypeError(f"expected torch.optim.Optimizer instances, got {type(opt).__name__}")
    return found


def _norms(tensors: list[torch.Tensor]) -> list[float]:
    """The L2 norm of each tensor as floats, read back from the device once per device."""
    norms = [torch.linalg.vector_norm(t.float()) for t in tensors]
    by_device: dict[torch.device, list[int]] = {}
    for i, n in enumerate(norms):
        by_device.setdefault(n.device, []).append(i)
    values = [0.0] * len(norms)
    for indices in by_device.values():
        for i, v in zip(indices, torch.stack([norms[i] for i in indices]).tolist(), strict=True):
            values[i] = v
    return values


def _weak_hook(method: Callable[[torch.optim.Optimizer], None]) -> Callable[..., None]:
    """A step hook with torch's signature that calls ``method`` only while its monitor lives."""
    ref = weakref.WeakMethod(method)

    def hook(opt: torch.optim.Optimizer, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        bound = ref()
        if bound is not None:
            bound(opt)

    return hook


def _remove(handles: list[RemovableHandle]) -> None:
    for handle in handles:
        handle.remove()


class OptimizerWatches:
    """The optimizer monitors of one explorer (``watch_optimizer()``): a new watch replaces any monitor of the same
    parameters, so a re-run cell never stacks; holds no explorer (its finalizer closes them)."""

    def __init__(self) -> None:
        self._watches: list[tuple[torch.optim.Optimizer | None, UpdateRatioMonitor]] = []

    @property
    def monitors(self) -> list[UpdateRatioMonitor]:
        """The monitors that still watch, oldest first."""
        return [monitor for _, monitor in self._watches]

    def watch(
        self, optimizer: torch.optim.Optimizer | None, model: nn.Module, model_name: str, scope: str, every: int
    ) -> UpdateRatioMonitor:
        """A monitor of ``optimizer`` (None: every optimizer stepping a parameter of ``model``), in place of those it
        replaces; TypeError or ValueError, naming the fix, for an optimizer that is none or steps none of them."""
        if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(
                f"watch_optimizer() takes a torch.optim.Optimizer (or None for every optimizer of the model), "
                f"got {type(optimizer).__name__}: ex.watch_optimizer(torch.optim.SGD(model.parameters(), lr=0.1))"
            )
        params = _param_ids(optimizer)
        if params is not None and not any(id(p) in params for p in model.parameters()):
            raise ValueError(
                f"this {type(optimizer).__name__} steps no parameter of the explored {model_name}: "
                "pass the optimizer made from this model's parameters"
            )
        # Made before the old monitors go: a bad scope or every leaves them as they were.
        monitor = UpdateRatioMonitor(optimizer, model, scope="global" if optimizer is None else scope, every=every)
        for old in [w for w in self._watches if w[0] is None or params is None or _param_ids(w[0]) & params]:
            old[1].close()
            self._watches.remove(old)
        self._watches.append((optimizer, monitor))
        return monitor

    def close(self) -> None:
        """Close every monitor and let go of the optimizers."""
        for _, monitor in self._watches:
            monitor.close()
        self._watches.clear()


@overload
def _param_ids(optimizer: torch.optim.Optimizer) -> set[int]: ...
@overload
def _param_ids(optimizer: torch.optim.Optimizer | None) -> set[int] | None: ...
def _param_ids(optimizer: torch.optim.Optimizer | None) -> set[int] | None:
    """Ids of the parameters ``optimizer`` steps; None stands for every optimizer of the model."""
    if optimizer is None:
        return None
    return {id(p) for group in optimizer.param_groups for p in group["params"]}
