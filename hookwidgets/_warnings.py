"""The warnings hookwidgets emits: one base class, ``HookwidgetsWarning``, and a class per situation.

Each class also derives from the standard category the warning had before it had a class of its own
(``UserWarning`` or ``RuntimeWarning``), so filters written for those keep working;
``warnings.filterwarnings("ignore", category=hookwidgets.HookwidgetsWarning)`` silences them all. Kept free of
torch so that ``import hookwidgets`` stays light.
"""

from __future__ import annotations

__all__ = [
    "AliasWarning",
    "BlankMapWarning",
    "CompiledModelWarning",
    "FixedModeWarning",
    "HookFailedWarning",
    "HookwidgetsWarning",
    "InplaceCollisionWarning",
    "MaterializedWarning",
    "PartialGraphWarning",
    "PatchSkippedWarning",
    "ProbeFailedWarning",
    "RunLogWarning",
    "SubscriberWarning",
    "UnwatchedModulesWarning",
    "ViewUpdateWarning",
]


class HookwidgetsWarning(Warning):
    """The base class of every warning hookwidgets emits."""


class MaterializedWarning(HookwidgetsWarning, UserWarning):
    """A run the user asked for materialized lazy modules: the model changed, and cannot be put back."""


class ProbeFailedWarning(HookwidgetsWarning, UserWarning):
    """The shape probe's forward of ``example_inputs`` raised, so the tree shows no output shapes."""


class CompiledModelWarning(HookwidgetsWarning, UserWarning):
    """A hook was attached to a ``torch.compile``'d model: its compiled code runs no hook added after its first call."""


class AliasWarning(HookwidgetsWarning, UserWarning):
    """``attach()`` was given a module or parameter by another of its names: the hook is on its first name."""


class InplaceCollisionWarning(HookwidgetsWarning, UserWarning):
    """An in-place op broke a full backward hook: it was explained and detached (or, someone else's, explained)."""


class FixedModeWarning(HookwidgetsWarning, UserWarning):
    """A run asked for training mode on a model that refuses ``train()`` (torch.export's module): it ran as it is."""


class HookFailedWarning(HookwidgetsWarning, UserWarning):
    """A hook's action raised; the error is recorded on ``ex.hooks`` and the model runs on."""


class PatchSkippedWarning(HookwidgetsWarning, UserWarning):
    """A replace or mean_ablate edit fits a generation's prompt step but not its decode steps: left out of them."""


class SubscriberWarning(HookwidgetsWarning, RuntimeWarning):
    """A subscriber of the explorer's events raised; it stays subscribed and its next errors are not shown."""


class ViewUpdateWarning(HookwidgetsWarning, UserWarning):
    """Updating the widget after an optimizer step failed; the step itself went on."""


class PartialGraphWarning(HookwidgetsWarning, RuntimeWarning):
    """The forward that ``graph()`` recorded raised, so the graph holds only the nodes made before the error."""


class BlankMapWarning(HookwidgetsWarning, UserWarning):
    """An attribution map is blank for some items: the layer's grid got no gradient from their score."""


class UnwatchedModulesWarning(HookwidgetsWarning, UserWarning):
    """``first_nonfinite`` could not watch ScriptModules (they take no hooks), so NaN/Inf may have begun inside one."""


class RunLogWarning(HookwidgetsWarning, RuntimeWarning):
    """A run log (``record_to``) stopped writing: its size budget was reached, or a write failed; training goes on."""
