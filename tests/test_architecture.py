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


FAMILY_KEYS = {"fpmac_array", "csb", "tt", "fb"}  # "fb": the explorer's old name of fpmac_array


def _family_tests(path):
    """Comparisons of an expression that names a family with a family's key, in the module at ``path``."""
    import ast

    text = path.read_text()
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.Compare):
            continue
        parts = [node.left, *node.comparators]
        constants = {p.value for p in parts if isinstance(p, ast.Constant)}
        constants |= {e.value for p in parts if isinstance(p, (ast.Tuple, ast.List, ast.Set))
                      for e in p.elts if isinstance(e, ast.Constant)}
        if not FAMILY_KEYS & constants:
            continue
        names = {n.id for p in parts for n in ast.walk(p) if isinstance(n, ast.Name)}
        names |= {n.attr for p in parts for n in ast.walk(p) if isinstance(n, ast.Attribute)}
        names |= {n.value for p in parts if not isinstance(p, ast.Constant) for n in ast.walk(p)
                  if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        if any("family" in name.lower() for name in names):
            yield f"{path}:{node.lineno}: {ast.get_source_segment(text, node)}"


def test_no_code_asks_for_a_training_family_by_name():
    """A family's behaviour lives in its record (codesign.deploy.families, codesign.design.families): code elsewhere
    asks the registry which family trains a design and reads the record, never ``if family == "tt"``."""
    from pathlib import Path

    import codesign

    found = [hit for path in sorted(Path(codesign.__file__).parent.rglob("*.py")) for hit in _family_tests(path)]
    assert found == [], "family names tested outside the registries:\n" + "\n".join(found)


def test_the_family_check_finds_a_test_by_name(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text('def f(loop):\n    return loop.get("family") == "csb" or loop.family in ("tt", "x")\n')
    assert len(list(_family_tests(probe))) == 2


MODULE_LIMIT = 600  # lines: a module holds one job


def test_no_module_over_the_limit():
    from pathlib import Path

    import codesign

    package = Path(codesign.__file__).parent
    long = {path.relative_to(package.parent).as_posix(): lines for path in sorted(package.rglob("*.py"))
            if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MODULE_LIMIT}
    assert long == {}, f"modules over {MODULE_LIMIT} lines (split them by job): {long}"
