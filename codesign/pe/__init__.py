"""Processing elements. Each PE is one room: golden kernel, spec, stimulus and flow glue share its name."""
