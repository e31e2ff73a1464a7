"""Training families, desktop side: one room per family, all behind one record (:class:`DesktopFamily`).

A training family (FB-float on an ``fpmac_array``, CSB, CSB conv, TT) is the golden
loop a design point trains with and the hardware it runs on. Its key is the
same everywhere: design.json's ``loop.family``, the explorer's reports, the
board side's registry (:mod:`codesign.deploy.families`) and the docs.

:data:`REGISTRY` names each family's record as ``"module:attribute"``, as
the PE registry names PEs (:mod:`codesign.pe`): a family's module is
imported on first use, and a new family is its own module plus one line
here (and one in the board side's registry). Nothing outside the two
registries asks for a family by name: it asks :func:`family_of` which
family trains a design, then that family's record.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from codesign.loops.common import HwTrainError
from codesign.registry import load_registered

# key -> "module:attribute" of its DesktopFamily
REGISTRY = {
    "fpmac_array": "codesign.design.families.fpmac_array:FAMILY",
    "csb": "codesign.design.families.csb:FAMILY",
    "csb_conv": "codesign.design.families.csb_conv:FAMILY",
    "tt": "codesign.design.families.tt:FAMILY",
}


@dataclass(frozen=True, kw_only=True)
class Refined:
    """What a family adds to the explorer's chosen point once the space is priced: the configuration and design
    point it settles on, extra keyword arguments of its model's ``step``, and its own reports (None: none).
    ``instead``: steps the space does not price, as the board would run them at some of its points (a TT
    design's call lists), for the explorer to take where one wins (:func:`codesign.design.explore_run.instead_choice`):
    ``candidates``, best first, each with ``index`` (the point), ``label``, ``pe`` (build fields to set per PE),
    ``design`` (``[design]`` fields to set), ``steps`` (its :class:`codesign.step.time.StepTime` by HP port
    count; ``host_hidden_s`` the host's seconds hidden beside it), ``stages`` (by port count, the stages the step
    was priced from), ``hardware`` (its builds described, for the stages' report), ``resources`` (its builds by
    the model) and ``reported`` (its report); ``runs_at_chosen`` (the chosen point's builds run that step too,
    and were priced so) and ``report`` (the key of ``reports`` that describes the step taken, else the best
    candidate's)."""

    chosen_toml: dict[str, Any]
    chosen_design: Any
    step_options: Mapping[str, Any]
    reports: Mapping[str, Any]
    instead: Mapping[str, Any] | None = None


REFINED_REPORTS = ("forward_split", "reuse", "other_route", "list_step", "mode_orders")  # the reports a family may add (None where it has none)


def unrefined(raw, design, chosen_toml, chosen_design, options, point, **_) -> Refined:
    """A family that adds nothing to its chosen point."""
    return Refined(chosen_toml=chosen_toml, chosen_design=chosen_design, step_options={},
                   reports=dict.fromkeys(REFINED_REPORTS))


@dataclass(frozen=True, kw_only=True)
class DesktopFamily:
    """One training family as the desktop sees it.

    ``detect`` says whether a design point's PEs are this family's
    hardware; ``setup_of(design, **changes)`` derives its golden loop's
    set-up (:mod:`codesign.loops`), raising :class:`HwTrainError` where the
    design's training cannot run on it; ``explorer(design, progress=,
    host=)`` builds the explorer's model of its step
    (:class:`codesign.design.explore_model.ExploreModel`), measuring the
    host's share here unless ``host`` (a board's report) is given;
    ``refine`` settles what the family decides after the space is priced
    (:func:`unrefined` for none). ``reads_validation(setup)`` says whether a
    loop of this set-up (design.json's plain data) reads a validation split,
    which a bundle then must ship. ``title`` names it in plots and reports.
    """

    key: str
    title: str
    detect: Callable[[Any], bool]
    setup_of: Callable[..., Any]
    explorer: Callable[..., Any]
    refine: Callable[..., Refined] = unrefined
    reads_validation: Callable[[Mapping[str, Any]], bool] = lambda setup: False

    def __post_init__(self) -> None:
        if not (self.key and self.title):
            raise ValueError("a training family needs a key and a title")


def family_names() -> tuple[str, ...]:
    return tuple(REGISTRY)


@lru_cache(maxsize=None)
def get_family(key: str) -> DesktopFamily:
    """The registered family ``key``; a clear error names the ones that exist."""
    return load_registered(REGISTRY, key, kind=("training family", "training families"),
                           key_of=lambda family: family.key)


def family_of(design) -> DesktopFamily | None:
    """The family whose hardware ``design``'s PEs are, or None (a design no training loop of ours runs)."""
    found = [family for family in map(get_family, REGISTRY) if family.detect(design)]
    if len(found) > 1:
        raise RuntimeError(f"design {design.name}: PEs claimed by several families ({[f.key for f in found]})")
    return found[0] if found else None


def untrainable(design) -> str | None:
    """Why a board's runtime cannot train ``design`` (no family's hardware, or its family's loop refuses the
    configuration), or None when it can: what ``codesign design`` and ``codesign bundle`` refuse by default."""
    family = family_of(design)
    titles = ", ".join(f"{get_family(key).title} ({key})" for key in REGISTRY)
    if family is None:
        return (f"design {design.name}: its PEs ({', '.join(design_pes(design)) or 'none'}) are no training family's "
                f"hardware, so a board cannot train it; the families are {titles}")
    try:
        family.setup_of(design)
    except HwTrainError as error:
        return (f"design {design.name}: the {family.title} loop cannot train it ({error}); a board trains the "
                f"families {titles}")
    return None


def loop_entry(design) -> dict[str, Any] | None:
    """design.json's ``loop``: the family and set-up of the design's golden loop, or None (no loop a board runs)."""
    family = family_of(design)
    if family is None:
        return None
    try:
        setup = family.setup_of(design)
    except HwTrainError:
        return None
    return {"family": family.key, "setup": setup.to_dict()}


def design_pes(design) -> list[str]:
    """The distinct PEs of ``design``'s instances, sorted: what a family's ``detect`` reads."""
    return sorted({instance.pe for instance in design.instances})


def shared_build(design, pe: str) -> tuple[Any, int]:
    """The build of ``design``'s ``pe`` instances and how many there are: one, or copies of one build, among which
    a list loop shares each step; refused where there is none or they differ."""
    specs = [instance.spec for instance in design.instances if instance.pe == pe]
    if not specs:
        raise HwTrainError(f"design {design.name!r} has no {pe} instance")
    if any(spec != specs[0] for spec in specs):
        raise HwTrainError(f"design {design.name!r}: its {len(specs)} {pe} instances differ; a loop shares its step "
                           "among copies of one build")
    return specs[0], len(specs)


__all__ = ["REFINED_REPORTS", "REGISTRY", "DesktopFamily", "Refined", "design_pes", "family_names", "family_of",
           "get_family", "loop_entry", "shared_build", "unrefined", "untrainable"]
