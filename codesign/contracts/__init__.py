"""What both sides of the flow must agree on, importable on a board with the standard library alone: the
stream word width and status codes (:mod:`codesign.contracts.constants`), and the shell's arguments, register map,
file names and design.json keys (:mod:`codesign.contracts.shell`)."""
