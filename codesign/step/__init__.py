"""A training step on an array of PEs: the floor between the training loops and the PEs.

It turns a training step into PE calls and prices it: each family's schedule and step (``tt/``, ``csb/``,
``fpmac_array/``), the rule for a stage's time and the stage log the board keeps (:mod:`codesign.step.model`), the
whole step's time with its bottleneck (:mod:`codesign.step.time`), and the host's share
(:mod:`codesign.step.host`). The loops (on a board too) and the explorer both read it; it reads only the PEs and
the floors below.
"""
