"""Make the checkout's ``codesign`` importable when pytest is started from a fresh checkout."""

import sys
from pathlib import Path

_CHECKOUT = str(Path(__file__).resolve().parents[2])
if _CHECKOUT not in sys.path:
    sys.path.insert(0, _CHECKOUT)
