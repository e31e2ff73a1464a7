"""Design points: from one training configuration to the hardware it needs, its fit, and its build folder.

:mod:`codesign.design.point` derives the PE instances from the training
configuration and the board; :mod:`codesign.design.fit` checks them against
the board's budget before anything is built.
"""

from codesign.design.point import DesignError, DesignPoint, PeInstance, design_from_dict, design_point, load_design

__all__ = ["DesignError", "DesignPoint", "PeInstance", "design_from_dict", "design_point", "load_design"]
