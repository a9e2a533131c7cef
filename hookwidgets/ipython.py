"""``%load_ext hookwidgets``: the ``%hookexplorer`` line magic and an opt-in display of modules as explorers.

``%hookexplorer model [inputs] [--name NAME]`` shows a HookExplorer; ``enable_display()`` makes an
``nn.Module`` that ends a cell show one too. ``%unload_ext hookwidgets`` closes every explorer made here.
Running the magic again replaces the explorer it made before (same name, or same model without a name),
so a re-run cell never leaves a hidden explorer's hooks on the model.
"""

from __future__ import annotations

import difflib
import weakref
from typing import Any

from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.core.magic import Magics, line_magic, magics_class
from IPython.display import display
from torch import nn

from .widget.explorer import HookExplorer

USAGE = "%hookexplorer model [inputs] [--name NAME], e.g. %hookexplorer model x --name ex"


class _Extension:
    """What the extension added to one shell: explorers it made, the magic, the display printer."""

    def __init__(self) -> None:
        self.explorers: list[HookExplorer] = []  # held strongly: a displayed explorer must outlive the cell
        self.by_model: dict[int, HookExplorer] = {}  # id(model) -> the explorer the display formatter made
        self.unnamed: dict[int, HookExplorer] = {}  # id(model) -> the explorer a magic without --name made
        self.magics: HookMagics | None = None
        self.printer: Any = None  # the printer enable_display() registered
        self.previous_printer: Any = None  # what was registered for nn.Module before it
        self.display_enabled = False

    def close_explorers(self, explorers: list[HookExplorer] | None = None) -> None:
        """Close ``explorers`` (default: all of them), removing their hooks from the models."""
        doomed = self.explorers if explorers is None else explorers
        for explorer in list(doomed):
            explorer.close()
        self.explorers = [e for e in self.explorers if all(e is not d for d in doomed)]
        self.by_model = {k: e for k, e in self.by_model.items() if any(e is x for x in self.explorers)}
        self.unnamed = {k: e for k, e in self.unnamed.items() if any(e is x for x in self.explorers)}


_STATE: weakref.WeakKeyDictionary[InteractiveShell, _Extension] = weakref.WeakKeyDictionary()


def _state(ip: InteractiveShell) -> _Extension:
    if ip not in _STATE:
        _STATE[ip] = _Extension()
    return _STATE[ip]


def _shell(ip: InteractiveShell | None) -> InteractiveShell:
    if ip is not None:
        return ip
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None:
        raise RuntimeError("this needs IPython: call it in a Jupyter notebook or an IPython shell")
    return shell


def split_line(line: str) -> list[str]:
    """Split a magic's line on top-level whitespace, keeping brackets and strings whole (``"x[:, 0]"``)."""
    parts: list[str] = []
    current: list[str] = []
    depth, quote = 0, ""
    for char in line:
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char.isspace() and depth <= 0:
            if current:
                parts.append("".join(current))
                current = []
            continue
        current.append(char)
    if current:
        parts.append("".join(current))
    return parts


def parse_line(line: str) -> tuple[str, str | None, str | None]:
    """``(model expression, inputs expression or None, name or None)`` from the magic's line; a UsageError for a
    missing model or name."""
    parts = split_line(line)
    name = None
    for flag in ("--name", "-n"):
        if flag in parts:
            at = parts.index(flag)
            if at + 1 >= len(parts) or not parts[at + 1].isidentifier():
                raise UsageError(f"%hookexplorer: {flag} needs a Python name after it; usage: {USAGE}")
            name = parts[at + 1]
            del parts[at : at + 2]
    if not parts:
        raise UsageError(f"%hookexplorer needs a model; usage: {USAGE}")
    inputs = " ".join(parts[1:]) or None
    return parts[0], inputs, name


def _evaluate(ip: InteractiveShell, expression: str, what: str) -> Any:
    """``expression`` evaluated in the user's namespace; a UsageError that names it when it fails."""
    try:
        return ip.ev(expression)
    except NameError as exc:
        missing = getattr(exc, "name", None) or expression
        close = difflib.get_close_matches(missing, [k for k in ip.user_ns if not k.startswith("_")], n=1)
        hint = f" — did you mean {close[0]!r}?" if close else f" — define {missing!r} in a cell first"
        raise UsageError(f"%hookexplorer: no variable {missing!r} for the {what}{hint}") from None
    except Exception as exc:
        raised = f"{type(exc).__name__}: {exc}"
        raise UsageError(f"%hookexplorer: evaluating the {what} {expression!r} raised {raised}") from None


@magics_class
class HookMagics(Magics):
    """The IPython ``Magics`` class of the ``%hookexplorer`` line magic; ``load_ipython_extension`` registers it."""

    @line_magic
    def hookexplorer(self, line: str) -> None:
        """Show a HookExplorer of ``model`` (with ``inputs`` as example inputs); ``--name ex`` binds it to ``ex``.

        Running it again closes the explorer it made before under that name (or, without a name, for that model).
        """
        ip = self.shell
        if ip is None:  # IPython sets it when it registers the magics
            raise UsageError("%hookexplorer runs in an IPython shell")
        model_expr, inputs_expr, name = parse_line(line)
        model = _evaluate(ip, model_expr, "model")
        if not isinstance(model, nn.Module):
            raise UsageError(
                f"%hookexplorer: {model_expr!r} is a {type(model).__name__}, not a torch.nn.Module — "
                f"pass the model itself; usage: {USAGE}"
            )
        inputs = _evaluate(ip, inputs_expr, "inputs") if inputs_expr is not None else None
        state = _state(ip)
        # Re-running the cell replaces its explorer: the old one's hooks would otherwise keep firing unseen.
        previous = ip.user_ns.get(name) if name else state.unnamed.get(id(model))
        if previous is not None and any(previous is e for e in state.explorers):
            state.close_explorers([previous])
        explorer = HookExplorer(model, example_inputs=inputs)
        state.explorers.append(explorer)
        if name:
            ip.user_ns[name] = explorer
        else:
            state.unnamed[id(model)] = explorer
        display(explorer)


def _show_module(state: _Extension, module: nn.Module) -> None:
    """Display the explorer of ``module`` (one explorer per module, reused on every display): its widget, with the
    module's own repr as text, then its static snapshot."""
    explorer = state.by_model.get(id(module))
    if explorer is None or explorer._model is not module:
        explorer = HookExplorer(module)
        state.explorers.append(explorer)
        state.by_model[id(module)] = explorer
    explorer._display(repr(module))  # a console without widgets still shows the module


def _display_formatter(ip: InteractiveShell) -> Any:
    """The shell's formatter of ``_ipython_display_``, where display hooks a printer per type: an object it takes
    shows as several outputs (the widget, then the snapshot)."""
    if ip.display_formatter is None:
        raise RuntimeError("this IPython shell has no display formatter: modules cannot be shown as explorers")
    return ip.display_formatter.ipython_display_formatter


def enable_display(ip: InteractiveShell | None = None) -> None:
    """Show an explorer for every ``nn.Module`` that is a cell's last expression, in the ``InteractiveShell`` ``ip``
    only (default: the running one)."""
    ip = _shell(ip)
    state = _state(ip)
    if state.display_enabled:
        return
    formatter = _display_formatter(ip)
    state.previous_printer = formatter.type_printers.get(nn.Module)
    state_ref = weakref.ref(state)

    def printer(module: nn.Module) -> None:
        current = state_ref()
        if current is not None:
            _show_module(current, module)
        else:  # the extension was unloaded under it: the module as IPython shows it
            display({"text/plain": repr(module)}, raw=True)

    formatter.for_type(nn.Module, printer)
    state.printer = printer
    state.display_enabled = True


def disable_display(ip: InteractiveShell | None = None) -> None:
    """Stop showing modules as explorers and close the explorers that display made (their hooks go)."""
    ip = _shell(ip)
    state = _state(ip)
    if not state.display_enabled:
        return
    formatter = _display_formatter(ip)
    if formatter.type_printers.get(nn.Module) is state.printer:
        formatter.type_printers.pop(nn.Module)
        if state.previous_printer is not None:
            formatter.for_type(nn.Module, state.previous_printer)
    state.printer = state.previous_printer = None
    state.display_enabled = False
    state.close_explorers(list(state.by_model.values()))


def load_ipython_extension(ip: InteractiveShell) -> None:
    """``%load_ext hookwidgets``: register the ``%hookexplorer`` magic (display stays opt-in)."""
    state = _state(ip)
    if state.magics is None:
        state.magics = HookMagics(ip)
        ip.register_magics(state.magics)


def unload_ipython_extension(ip: InteractiveShell) -> None:
    """``%unload_ext hookwidgets``: remove the magic and the display printer, close every explorer made here."""
    state = _state(ip)
    disable_display(ip)
    if state.magics is not None:
        manager = ip.magics_manager
        line_magics = manager.magics["line"]
        if getattr(line_magics.get("hookexplorer"), "__self__", None) is state.magics:
            del line_magics["hookexplorer"]
        manager.registry.pop(type(state.magics).__name__, None)
        state.magics = None
    state.close_explorers()
    _STATE.pop(ip, None)
