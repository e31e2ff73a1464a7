"""General file I/O on the ground floor: atomic writes, JSON readers that name the file and field at fault,
the output-folder rule, the HLS project marker and report writing. Standard library (and matplotlib for figures,
imported when a figure is written)."""
