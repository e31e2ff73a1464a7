"""Frozen, keyword-only dataclasses on every Python the board runtime supports (3.8 and later).

``dataclass(kw_only=True)`` arrived in Python 3.10; a PYNQ 2.7 image ships 3.8.
:func:`keyword_record` gives the same contract everywhere: frozen fields, and a
constructor that refuses positional arguments, so a spec written
``Spec(8, 4)`` fails on every version rather than meaning something on one.
Fields are declared as for a plain dataclass (defaults after the fields
without one).
"""

from __future__ import annotations

import dataclasses
import functools


def keyword_record(cls=None, **options):
    """``@dataclass(frozen=True, **options)`` whose ``__init__`` takes keyword arguments only."""

    def wrap(klass):
        klass = dataclasses.dataclass(frozen=True, **options)(klass)
        positional_init = klass.__init__

        @functools.wraps(positional_init)
        def __init__(self, *args, **kwargs):
            if args:
                raise TypeError(f"{klass.__name__}() takes keyword arguments only, got {len(args)} positional")
            positional_init(self, **kwargs)

        klass.__init__ = __init__
        return klass

    return wrap if cls is None else wrap(cls)
