"""What each module becomes when a model is saved with ``torch.package``, through the exporter's hooks."""

from __future__ import annotations

import io
import os
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch import nn
from torch.package import EmptyMatchError, PackageExporter, PackageImporter, PackagingError
from torch.package.glob_group import GlobGroup

# Tried in this order, first match wins (as torch does): the narrower intents go first, so
# ``mock="mypkg.heavy"`` beats ``intern="mypkg.**"``.
PATTERN_ORDER = ("deny", "mock", "extern", "intern")
DEFAULT_EXTERN = ("torch", "torch.**")
ACTION_ORDER = {"broken": 0, "intern": 1, "mock": 2, "extern": 3}
Patterns = str | Iterable[str]
NO_MATCH = "no pattern matched"


@dataclass
class PackageReport:
    """One export: a row per module (``module``, ``action``, ``why``), whether it worked, and the reload."""

    rows: list[dict[str, str]]
    """One dict per module: ``module``, ``action``, ``why``."""
    ok: bool
    """Whether the export worked."""
    error: str | None = None
    """torch's reasons when it failed."""
    path: str | None = None
    """Where the package was written, or None (in memory)."""
    nbytes: int = 0
    """The package's size in bytes."""
    loaded: str | None = None
    """The qualified class name of the model loaded back."""
    patterns: dict[str, list[str]] = field(default_factory=dict)
    """The patterns used, by action."""

    def modules(self, action: str) -> list[str]:
        """The module names that ended as ``action`` (intern, extern, mock or broken)."""
        return [r["module"] for r in self.rows if r["action"] == action]

    def __repr__(self) -> str:
        width = max([len(r["module"]) for r in self.rows] + [6])
        lines = [f"{'module':<{width}}  {'action':<7} why", f"{'-' * width}  {'-' * 7} {'-' * 3}"]
        lines += [f"{r['module']:<{width}}  {r['action']:<7} {r['why']}" for r in self.rows]
        if self.ok:
            where = self.path or "memory"
            lines.append(f"packaged, {self.nbytes:,} bytes in {where}; reloaded as {self.loaded}")
        else:
            lines.append(f"packaging failed: {self.error}")
        return "\n".join(lines)


def package_report(
    model: nn.Module,
    *,
    intern: Patterns | None = None,
    extern: Patterns = DEFAULT_EXTERN,
    mock: Patterns = (),
    deny: Patterns = (),
    path: str | os.PathLike[str] | None = None,
    load: bool = True,
) -> PackageReport:
    """Package ``model`` with ``torch.package`` and report what each module became, and why.

    ``intern=None`` interns the top-level packages of the model's own classes (torch's excluded).
    The package goes to ``path``, or stays in memory; ``load`` reloads it to check that it works.
    A failed export is reported (``ok=False``, the broken modules and torch's reasons), not raised;
    no hook fires then, so its rows come from the exporter's dependency graph.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"package_report needs a torch.nn.Module, got {type(model).__name__}")
    given = {
        "deny": _patterns(deny),
        "mock": _patterns(mock),
        "extern": _patterns(extern),
        "intern": _patterns(intern) if intern is not None else default_intern(model),
    }
    target: Any = io.BytesIO() if path is None else str(Path(path))
    exporter = PackageExporter(target)
    groups: list[tuple[str, str, GlobGroup]] = []
    for action in PATTERN_ORDER:
        for pattern in given[action]:
            getattr(exporter, action)(pattern)
            groups.append((action, pattern, list(exporter.patterns)[-1]))
    fired: list[tuple[str, str]] = []
    handles = [
        exporter.register_intern_hook(lambda e, name: fired.append((name, "intern"))),
        exporter.register_extern_hook(lambda e, name: fired.append((name, "extern"))),
        exporter.register_mock_hook(lambda e, name: fired.append((name, "mock"))),
    ]
    try:
        with warnings.catch_warnings():
            # torch's own pickler touches TypedStorage; the warning is about torch internals, not the model
            warnings.filterwarnings("ignore", message="TypedStorage is deprecated", category=UserWarning)
            exporter.save_pickle("model", "model.pkl", model)
            exporter.close()  # type: ignore[no-untyped-call]  # unannotated in torch
    except (PackagingError, EmptyMatchError) as exc:
        exporter._finalize_zip()  # type: ignore[no-untyped-call]  # unannotated in torch; leave the file or buffer a valid (empty) archive, as torch's __exit__ does
        nodes = exporter.dependency_graph.nodes.items()
        rows = [_row(name, attrs, _why(name, groups, exporter)) for name, attrs in nodes]
        return PackageReport(_sorted(rows), False, str(exc).strip(), patterns=given)
    finally:
        for handle in handles:
            handle.remove()
    rows = [{"module": name, "action": action, "why": _why(name, groups, exporter)} for name, action in fired]
    data = target.getvalue() if isinstance(target, io.BytesIO) else None
    nbytes = len(data) if data is not None else Path(target).stat().st_size
    loaded = _reload(data if data is not None else target) if load else None
    where = None if path is None else target
    return PackageReport(_sorted(rows), True, path=where, nbytes=nbytes, loaded=loaded, patterns=given)


def default_intern(model: nn.Module) -> list[str]:
    """Patterns for the top-level packages of the model's own (non-torch) module classes."""
    tops = sorted({type(m).__module__.partition(".")[0] for m in model.modules()} - {"torch"})
    return [p for top in tops for p in (top, f"{top}.**")]


def _patterns(value: Patterns) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _why(name: str, groups: list[tuple[str, str, GlobGroup]], exporter: PackageExporter) -> str:
    """Which rule decided ``name``: torch's implicit extern (checked before any pattern) or a pattern."""
    if name.startswith("<"):
        return "the pickled model itself"
    if exporter._can_implicitly_extern(name):  # torch's own rule, so the report cannot drift from it
        return "torch: always extern" if name.partition(".")[0] == "torch" else "standard library: always extern"
    for action, pattern, group in groups:
        if group.matches(name):
            return f"{action} pattern {pattern!r}"
    return NO_MATCH


def _row(name: str, attrs: dict[str, Any], why: str) -> dict[str, str] | None:
    """A row from torch's dependency graph, used when the export failed and no hook fired."""
    error = attrs.get("error")
    if error is not None:
        return {"module": name, "action": "broken", "why": error.value if why == NO_MATCH else f"{error.value} ({why})"}
    action = getattr(attrs.get("action"), "name", "").lower()
    if action not in ACTION_ORDER:  # torch's internal nodes (the mock helper module, skips)
        return None
    return {"module": name, "action": action, "why": why}


def _sorted(rows: Iterable[dict[str, str] | None]) -> list[dict[str, str]]:
    return sorted((r for r in rows if r), key=lambda r: (ACTION_ORDER[r["action"]], r["module"]))


def _reload(source: bytes | str) -> str:
    """The qualified type name of the model loaded back from the package."""
    importer = PackageImporter(io.BytesIO(source) if isinstance(source, bytes) else source)
    loaded = importer.load_pickle("model", "model.pkl")
    return f"{type(loaded).__module__}.{type(loaded).__qualname__}"
