"""codesign: co-design of energy-efficient on-device training accelerators on FPGAs."""

__version__ = "0.1.0"
