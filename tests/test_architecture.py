"""The package's import graph has no cycles: no module reaches itself through the modules it imports.

The layers and the board runtime's forbidden imports are import-linter contracts (pyproject.toml, run by
``make test`` as ``lint-imports``); import-linter has no cycle contract, so this test asks grimp, the graph
import-linter builds on, directly. Imports under ``TYPE_CHECKING`` are left out, as the contracts leave them.
"""

from __future__ import annotations

import grimp


def test_no_module_imports_itself_through_others():
    graph = grimp.build_graph("codesign", exclude_type_checking_imports=True)
    cycles = [(module, imported) for module in sorted(graph.modules)
              for imported in sorted(graph.find_modules_directly_imported_by(module))
              if imported.startswith("codesign") and graph.chain_exists(importer=imported, imported=module)]
    assert cycles == [], "import cycles (module -> a module that imports it back): " + ", ".join(
        f"{a} -> {b}" for a, b in cycles)
    assert {"codesign.deploy.overlay", "codesign.loops.fb", "codesign.cli"} <= graph.modules  # the whole package
