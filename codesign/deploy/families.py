"""Training families, board side: which board trainer, golden loop and set-up train a design, read from
design.json's ``loop`` entry.

A board has design.json and nothing of the desktop, so the family recorded
there (:func:`codesign.design.families.loop_entry`) picks the trainer: the
notebooks of a bundle, the self-check and the host-share command ask
:func:`board_trainer`, :func:`golden_trainer` or :func:`measure_loop_host`
instead of naming a class. Each family's :class:`BoardFamily` record sits
beside its board trainer; :data:`REGISTRY` names them as ``"module:attribute"``
(as the PE registry does, :mod:`codesign.pe`), the same keys as the desktop's
registry (:mod:`codesign.design.families`). A family's module is imported
when a design of it is trained, so a board imports only the family it runs.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable, Mapping, NamedTuple, Optional, Tuple

from codesign.deploy.manifest import DeployError, setup_from_manifest
from codesign.registry import load_registered
from codesign.step.host import HostModel

# key -> "module:attribute" of its BoardFamily
REGISTRY = {
    "fpmac_array": "codesign.deploy.training:FAMILY",
    "csb": "codesign.deploy.csb_training:FAMILY",
    "csb_conv": "codesign.deploy.csb_conv_training:FAMILY",
    "tt": "codesign.deploy.tt_list_training:FAMILY",
}


class BoardFamily(NamedTuple):
    """One training family as the board runtime sees it.

    ``board(overlay, **changes)`` (a class, or a function choosing one from
    the set-up and the IPs) trains on the IPs, ``golden`` is the NumPy loop
    it is compared with, ``setup`` rebuilds design.json's ``loop.setup``; ``state_keys``
    name the state words a comparison reads; ``example`` is the shipped
    design (``examples/<example>``) that trains with it (benchmarks and
    demos take it from here); ``quick_changes`` shorten a run to the whole
    path in two epochs (the self-check, a notebook's quick mode);
    ``measure_host(setup, source=, data=)`` measures the host's share of a
    step here, and ``host_needs_data`` says whether that needs the data set.
    (A NamedTuple: the board runtime runs on Python 3.8.)
    """

    key: str
    board: Callable[..., Any]
    golden: type
    setup: type
    state_keys: Tuple[str, ...]
    example: str
    quick_changes: Mapping[str, Any]
    measure_host: Callable[..., HostModel]
    host_needs_data: bool = False


def family_names() -> Tuple[str, ...]:
    return tuple(REGISTRY)


@lru_cache(maxsize=None)
def get_family(key: str) -> BoardFamily:
    """The registered family ``key``; a clear error names the ones that exist."""
    return load_registered(REGISTRY, key, kind=("training family", "training families"),
                           key_of=lambda family: family.key)


def family_of(manifest: Mapping[str, Any]) -> BoardFamily:
    """The family of the loop design.json records; a clear error for a design with none this runtime trains."""
    loop = manifest.get("loop")
    family = loop.get("family") if isinstance(loop, Mapping) else None
    if family not in REGISTRY:
        raise DeployError(f"design {manifest.get('design')!r}: design.json records "
                          f"{'no loop' if family is None else f'a {family!r} loop'}; the board runtime trains the "
                          f"{', '.join(REGISTRY)} loops")
    return get_family(family)


def board_trainer(overlay, **setup_changes):
    """The board trainer of ``overlay``'s design, with ``setup_changes`` (epochs, batch size...) applied."""
    return family_of(overlay.manifest).board(overlay, **setup_changes)


def golden_trainer(manifest: Mapping[str, Any], **setup_changes):
    """The golden loop of the design in ``manifest``, with the same changes: what a board run is compared with."""
    family = family_of(manifest)
    return family.golden(setup_from_manifest(manifest, family.setup, setup_changes))


def measure_loop_host(loop: Mapping[str, Any], *, source: Optional[str] = None, data=None) -> HostModel:
    """The host's share of a step of design.json's ``loop`` entry, measured here (``source`` says where; default:
    this machine); a family whose host work depends on the data (CSB: its warm-up prunes the weights) needs
    ``data``. The host-share timers load only when asked: ``import codesign.deploy`` stays light on a board."""
    from codesign.loops.host_share import THIS_MACHINE

    source = THIS_MACHINE if source is None else source
    family = family_of({"loop": loop})
    if family.host_needs_data and data is None:
        raise ValueError(f"a {family.key} loop's host share needs its data set: its warm-up decides the work")
    return family.measure_host(setup_from_manifest({"loop": loop}, family.setup), source=source,
                               data=data)


__all__ = ["REGISTRY", "BoardFamily", "board_trainer", "family_names", "family_of", "get_family", "golden_trainer",
           "measure_loop_host"]
