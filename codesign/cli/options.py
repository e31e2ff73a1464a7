"""The command line's argument types and the flags derived from spec dataclasses: every value is checked as it is
parsed, so a bad flag is refused before any command starts."""

from __future__ import annotations

import argparse
import math
import dataclasses

from codesign.boards import boards
from codesign.pe import get_pe, pe_names

SPEC, STIMULUS = "spec", "stim"  # argparse dest prefixes of spec fields and stimulus fields


def _int_list(text: str) -> list[int]:
    try:
        return [int(item) for item in text.split(",") if item.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def positive_int(text: str) -> int:
    """An argparse type: a whole number >= 1 (``--checkpoint-every 0`` or ``-5`` is refused, not taken)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {value}")
    return value


def _checked(check):
    """An argparse type from a check that raises ValueError: argparse then names the flag in its one error line."""
    def parse(text: str):
        try:
            return check(text)
        except (TypeError, ValueError) as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    parse.__name__ = check.__name__.lstrip("_")
    return parse


@_checked
def percent(text: str) -> float:
    """A share of a board's resources in percent, in (0, 100]: every command's resource cap (``--limit``)."""
    value = float(text)
    if not (math.isfinite(value) and 0 < value <= 100):
        raise ValueError(f"must be a percentage in (0, 100], got {text!r}")
    return value


@_checked
def board_name(text: str) -> str:
    if text not in boards():
        raise ValueError(f"unknown board {text!r}; known: {', '.join(sorted(boards()))}")
    return text


@_checked
def _part_name(text: str) -> str:
    parts = sorted({known.part for known in boards().values()})
    if text not in parts:
        raise ValueError(f"unknown FPGA part {text!r}; the boards' parts: {', '.join(parts)}")
    return text


@_checked
def clock_mhz(text: str) -> float:
    """A clock in MHz, as the design TOML's ``clock_mhz`` gives it, within the HLS period range of
    :class:`~codesign.hw.target.BuildTarget` (one range check, in one place)."""
    from codesign.hw.target import CLOCK_RANGE_NS

    value = float(text)
    low, high = 1e3 / CLOCK_RANGE_NS[1], 1e3 / CLOCK_RANGE_NS[0]
    if not (math.isfinite(value) and low <= value <= high):
        raise ValueError(f"clock {text} MHz is out of range [{low:g}, {high:g}] MHz")
    return value


@_checked
def _top_name(text: str) -> str:
    from codesign.hw.target import check_top_name

    return check_top_name(text)


@_checked
def level_list(text: str) -> str:
    from codesign.hw.flow import check_levels

    levels = [level.strip() for level in text.split(",")]
    if any(not level for level in levels) or len(set(levels)) != len(levels):
        raise ValueError(f"expected distinct comma-separated levels, got {text!r}")
    check_levels(levels)
    return text


@_checked
def fpga_families(text: str) -> str:
    from codesign.hw.estimate import check_families

    families = text.split(",")
    if any(family != family.strip() for family in families):
        raise ValueError(f"expected comma-separated family names without spaces, got {text!r}")
    check_families(families)
    return text


@_checked
def scheduler_address(text: str) -> str:
    """``scheme://host:port`` as Dask takes it (the port in 1..65535); whether anything listens is probed later."""
    import re

    match = re.fullmatch(r"(tcp|tls|ucx)://([^\s:/]+|\[[0-9a-fA-F:]+\]):(\d+)", text)
    if not match or not 1 <= int(match.group(3)) <= 65535:
        raise ValueError(f"expected a scheduler address such as tcp://host:8786 (port 1..65535), got {text!r}")
    return text


@_checked
def non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(f"must be a whole number >= 0, got {value}")
    return value


def seed_list(text: str) -> list[int]:
    """An argparse type: comma-separated seeds, each an int in SEED_RANGE, at least one, none repeated."""
    from codesign.train.config import SEED_RANGE

    seeds = _int_list(text)
    low, high = SEED_RANGE
    if not seeds:
        raise argparse.ArgumentTypeError(f"expected at least one seed, got {text!r}")
    bad = [seed for seed in seeds if not low <= seed <= high]
    if bad:
        raise argparse.ArgumentTypeError(f"seeds must be ints in [{low}, {high}], got {bad[0]}")
    if len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"seeds must not repeat, got {text!r}")
    return seeds


def _parse_value(kind: type, text: str):
    if kind is bool:
        if text.lower() not in ("true", "false", "1", "0"):
            raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
        return text.lower() in ("true", "1")
    if kind is tuple:
        return tuple(_int_list(text))
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a {kind.__name__}, got {text!r}") from None


def _add_dataclass_options(parser: argparse.ArgumentParser, cls: type, prefix: str, *, sweep: bool = False) -> None:
    """One ``--field-name`` flag per field of ``cls`` (default: the dataclass default, shown in --help).

    With ``sweep`` every flag takes a comma-separated list and the command runs
    the cross product.
    """
    defaults = cls()
    for field in dataclasses.fields(cls):
        default = getattr(defaults, field.name)
        kind = type(default)
        flag = "--" + field.name.replace("_", "-")
        shown = ",".join(map(str, default)) if kind is tuple else default
        if sweep and kind is not tuple:
            parser.add_argument(flag, dest=f"{prefix}__{field.name}", default=None, metavar="V[,V...]",
                                type=lambda text, k=kind: [_parse_value(k, item) for item in text.split(",")],
                                help=f"{field.name} value(s) to sweep (default {shown})")
        else:
            parse = (lambda text, k=kind: _parse_value(k, text)) if prefix != STIMULUS else \
                (lambda text, k=kind, c=cls, f=field.name: _stimulus_value(c, f, _parse_value(k, text)))
            parser.add_argument(flag, dest=f"{prefix}__{field.name}", default=None, metavar=kind.__name__.upper(),
                                type=parse, help=f"{field.name} (default {shown})")


def _stimulus_value(cls: type, name: str, value):
    """A stimulus option checked by its own class (the options have no cross-field rules), so argparse names it."""
    try:
        cls(**{name: value})
    except (TypeError, ValueError) as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return value


def dataclass_fields_from(args: argparse.Namespace, prefix: str) -> dict:
    return {key.split("__", 1)[1]: value for key, value in vars(args).items()
            if key.startswith(prefix + "__") and value is not None}


def _add_target_options(parser: argparse.ArgumentParser, interfaces: tuple[str, ...]) -> None:
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--board", type=board_name, help=f"target board ({', '.join(sorted(boards()))}); default zedboard")
    target.add_argument("--part", type=_part_name, help="target FPGA part (must belong to a known board); default: the board's")
    parser.add_argument("--clock-mhz", type=clock_mhz, default=100.0, help="HLS clock (MHz), as clock_mhz in a "
                        "design TOML (default 100)")
    parser.add_argument("--interface", default=None, choices=interfaces, help=f"data interface (default {interfaces[0]})")
    parser.add_argument("--top", type=_top_name, default=None, help="name of the HLS top function (default <pe>_kernel)")


def target_from(args: argparse.Namespace):
    from codesign.boards import board
    from codesign.hw.target import BuildTarget

    part = args.part or board(args.board or "zedboard").part
    return BuildTarget(part=part, clock_period_ns=1e3 / args.clock_mhz, interface=args.interface, top=args.top)


def pe_subparsers(command: argparse.ArgumentParser, *, target: bool = False, stimulus: bool = False,
                   sweep: bool = False) -> dict[str, argparse.ArgumentParser]:
    """One sub-command per registered PE, with its spec (and stimulus, target) flags."""
    choices = command.add_subparsers(dest="pe", required=True, metavar="PE", help=f"one of: {', '.join(pe_names())}")
    parsers = {}
    for name in pe_names():
        pe = get_pe(name)
        sub = choices.add_parser(name, help=pe.title)
        _add_dataclass_options(sub, pe.spec_class, SPEC, sweep=sweep)
        if stimulus:
            _add_dataclass_options(sub, pe.stimulus_class, STIMULUS)
        if target:
            _add_target_options(sub, pe.interfaces)
        parsers[name] = sub
    return parsers


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Help that states what every option does when it is not given: its default value, "(required)", or, for a
    default of None, the help's own "default: ..." wording (``tests/test_cli.py`` checks every option)."""

    FLAGS = (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse._HelpAction, argparse._VersionAction)

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if not action.option_strings or isinstance(action, self.FLAGS) or "default" in text:
            return text
        if action.required:
            return f"{text} (required)"
        if action.default is None or action.default is argparse.SUPPRESS:
            return text
        return f"{text} (default: %(default)s)"


def state_defaults(parser: argparse.ArgumentParser) -> None:
    """Give ``parser`` and every sub-command under it :class:`DefaultsHelpFormatter`."""
    parser.formatter_class = DefaultsHelpFormatter
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                state_defaults(sub)
