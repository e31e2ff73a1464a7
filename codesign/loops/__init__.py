"""Golden training loops per PE family, in NumPy: the host's side of a training step, shared by the golden run
and the board run.

Each loop takes its layer work from a *backend* (the golden kernels, or the IPs of a board through
:mod:`codesign.deploy`) and does the rest on the host in a precision its module documents, so a run on the
board can be compared with the golden run bit for bit. Nothing here imports torch, scikit-learn or the
desktop flow: these modules run on a PYNQ board's own Python (3.8 and later, NumPy only).
"""
