"""Rules of the layout that a test keeps true (read from the source, imports inside
functions included): the pure core imports only the standard library and itself, and no
production module imports the in-memory doubles of ``service.testing``."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from tests.service_process import ROOT

SERVICE = ROOT / "service"
# The pure core: rules and decisions, no I/O, standard library only.
CORE = {
    "changes",
    "errors",
    "group_status",
    "leases",
    "ledger",
    "ledger_state",
    "offsets",
    "replica_merge",
    "spark_progress",
}


def imports_of(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found - {"__future__"}


def test_the_core_imports_only_the_standard_library_and_the_core() -> None:
    for name in sorted(CORE):
        for module in imports_of(SERVICE / f"{name}.py"):
            top = module.split(".")[0]
            if top == "service":
                assert module.split(".")[1] in CORE, f"service.{name} imports {module}"
            else:
                assert top in sys.stdlib_module_names, f"service.{name} imports {module}"


def test_no_production_module_imports_the_test_doubles() -> None:
    for path in sorted(SERVICE.glob("*.py")):
        if path.stem != "testing":
            assert "service.testing" not in imports_of(path), f"{path.name} imports them"
