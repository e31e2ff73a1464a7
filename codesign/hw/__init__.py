"""Hardware flow: rendering, vector files, C simulation, RTL simulation and synthesis estimates."""
