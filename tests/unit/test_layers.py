"""The layout's rules, read from the source (imports inside functions and under
TYPE_CHECKING included), so that the tree keeps saying what may import what.

Each module of ``spark_offset_sidecar`` is in a layer (its first subpackage, or its own name
for the modules at the top), and a layer imports only the layers of ``MAY_IMPORT``:

    core -> ports -> adapters (kafka, sql) -> app
                  -> runtime (loops)  -> http (routes) -> app
    errors and observe are reached from everywhere above the core; turns (sharing the
    event loop, standard library only) from the loops, observe and the HTTP layer.

Also: the core and the ports import only the standard library; the runtime and the HTTP
layer import no Kafka or database driver; the two adapter families never import each
other; nothing imports the composition roots (``app``) but the command line and the child
programs (``child``); production
never imports the doubles of ``testing``; no import cycle; the Spark side (``jobs/``)
imports nothing of the service."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from harness.machine import ROOT

PACKAGE = "spark_offset_sidecar"
SOURCE = ROOT / "service" / PACKAGE

MAY_IMPORT: dict[str, set[str]] = {
    "errors": set(),
    "turns": set(),
    "heap": set(),
    "topology": set(),
    "core": {"errors"},
    "ports": {"core", "errors"},
    "observe": {"core", "errors", "turns"},
    "settings": {"errors", "core"},  # core: names' rules, the clusters' choice
    "adapters": {"core", "ports", "errors", "settings"},
    "runtime": {"core", "ports", "observe", "errors", "turns"},
    "http": {"core", "ports", "runtime", "observe", "errors", "settings", "turns", "topology"},
    "app": {
        "core",
        "ports",
        "adapters",
        "runtime",
        "http",
        "observe",
        "errors",
        "settings",
        "topology",
        "child",
    },
    # The service's children as programs: the writer (its adapter), the watcher (``app``).
    "child": {"adapters", "observe", "app", "errors", "settings"},
    # The process: it alone sets the interpreter's heap keeper.
    "cli": {"app", "adapters", "observe", "errors", "settings", "core", "heap", "serving"},
    "serving": {"settings"},  # uvicorn, for the service
    "testing": {"core", "ports", "errors"},
}
STDLIB_ONLY = {"errors", "core", "ports", "turns", "heap", "topology"}
DRIVERS = {
    "aiokafka",
    "kafka",
    "sqlalchemy",
    "psycopg",
    "alembic",
    "fsspec",
    "s3fs",
    "botocore",
    "jwt",
    "aws_msk_iam_sasl_signer",
}
NO_DRIVERS = {"runtime", "http", "observe", "testing"}


def module_name(path: Path) -> str:
    parts = path.relative_to(SOURCE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(SOURCE.rglob("*.py"))}


def layer(module: str) -> str:
    """``spark_offset_sidecar.adapters.sql.store`` -> ``adapters``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports_of(path: Path) -> set[str]:
    """Every module ``path`` imports, ``from package import module`` resolved to the module."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in MODULES else node.module)
    return found - {"__future__"}


def own_imports(module: str) -> Iterator[str]:
    for imported in imports_of(MODULES[module]):
        if imported.split(".")[0] == PACKAGE and imported != PACKAGE:
            yield imported


def test_every_module_is_in_a_layer_with_rules() -> None:
    layers = {layer(m) for m in MODULES} - {"__init__", "migrations"}
    assert layers == set(MAY_IMPORT), "a new layer: give it rules in MAY_IMPORT"


def layer_violations(module: str, imported: Iterable[str]) -> list[str]:
    here = layer(module)
    return [
        f"{module} imports {i}"
        for i in imported
        if i.split(".")[0] == PACKAGE and layer(i) != here and layer(i) not in MAY_IMPORT[here]
    ]


@pytest.mark.parametrize("module", sorted(m for m in MODULES if layer(m) in MAY_IMPORT))
def test_each_layer_imports_only_the_layers_below_it(module: str) -> None:
    assert layer_violations(module, own_imports(module)) == []


@pytest.mark.parametrize("module", sorted(m for m in MODULES if layer(m) in STDLIB_ONLY))
def test_the_core_the_ports_and_errors_import_only_the_standard_library(
    module: str,
) -> None:
    for imported in imports_of(MODULES[module]):
        top = imported.split(".")[0]
        assert top == PACKAGE or top in sys.stdlib_module_names, f"{module} imports {imported}"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if layer(m) in NO_DRIVERS))
def test_loops_and_routes_reach_kafka_and_the_database_only_through_ports(module: str) -> None:
    for imported in imports_of(MODULES[module]):
        assert imported.split(".")[0] not in DRIVERS, f"{module} imports {imported}"


def shared_adapter(module: str) -> bool:
    """A module right under ``adapters`` (no family): what two families' wires share."""
    return module.count(".") == 2 and module.startswith(f"{PACKAGE}.adapters.")


def test_the_kafka_and_the_sql_adapters_do_not_import_each_other() -> None:
    """Each family of adapters imports only itself and the shared modules, which import
    no family."""
    for module in MODULES:
        if module.startswith(f"{PACKAGE}.adapters."):
            family = module.split(".")[2]
            for imported in own_imports(module):
                if layer(imported) == "adapters" and not shared_adapter(imported):
                    mine = not shared_adapter(module) and imported.split(".")[2] == family
                    assert mine, f"{module} imports {imported}"


# aiokafka's documented API (its reference: consumer, producer, admin client, errors,
# abc, helpers, structs); the rest is reached through the one door only.
AIOKAFKA_PUBLIC = {"aiokafka", "aiokafka.admin", "aiokafka.errors", "aiokafka.abc"}
AIOKAFKA_PUBLIC |= {"aiokafka.helpers", "aiokafka.structs"}
KAFKA_DOOR = f"{PACKAGE}.adapters.kafka.wire"


def test_only_the_door_goes_below_aiokafkas_public_api() -> None:
    """``adapters/kafka/wire.py`` alone imports aiokafka's undocumented modules or calls a
    private method of its objects (``._send_request``, ...), and it imports aiokafka and
    the standard library only (its contract test runs it with nothing else)."""
    for module, path in MODULES.items():
        if module == KAFKA_DOOR:
            continue
        below = {i for i in imports_of(path) if i.startswith("aiokafka")} - AIOKAFKA_PUBLIC
        assert not below, f"{module} imports {below}: through {KAFKA_DOOR} instead"
        if module.startswith(f"{PACKAGE}.adapters.kafka."):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
                    mine = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
                    assert mine or node.attr.startswith("__"), f"{module}: .{node.attr}"
    own = [i for i in imports_of(MODULES[KAFKA_DOOR]) if i.split(".")[0] == PACKAGE]
    assert own == [], f"the door imports {own}"


def test_nothing_imports_the_composition_roots_but_the_programs() -> None:
    """The command line and the child programs, each importing the root it runs."""
    for module in MODULES:
        if layer(module) not in ("app", "cli", "child"):
            assert not [i for i in own_imports(module) if layer(i) == "app"], module


def test_the_composition_roots_package_imports_none_of_them() -> None:
    """Importing ``app.watch`` runs ``app/__init__`` first: were it to import ``app.root``,
    the watcher would load the whole service (docs/decisions.md, "Each process imports
    what it runs")."""
    assert list(own_imports(f"{PACKAGE}.app")) == []


def test_no_production_module_imports_the_test_doubles() -> None:
    for module in MODULES:
        if module != f"{PACKAGE}.testing":
            assert f"{PACKAGE}.testing" not in set(own_imports(module)), module


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str] | None:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return None
        for imported in sorted(graph.get(module, ())):
            if cycle := visit(imported, [*path, module]):
                return cycle
        done.add(module)
        return None

    for module in sorted(graph):
        if cycle := visit(module, []):
            return cycle
    return None


def test_no_import_cycle() -> None:
    graph = {m: {i for i in own_imports(m) if i in MODULES} for m in MODULES}
    assert find_cycle(graph) is None


# The core's parts (``core/__init__``): the shared modules at its top import no part; a
# part imports the shared modules, and the lag part the ledger's state too.
CORE_MAY_IMPORT: dict[str, set[str]] = {
    "": set(),
    "ledger": set(),
    "spark": set(),
    "lag": {"ledger"},
}


def core_part(module: str) -> str:
    """``spark_offset_sidecar.core.ledger.rules`` -> ``ledger``; a shared module -> ``""``."""
    parts = module.split(".")
    return parts[2] if len(parts) > 3 else ""


def core_violations(module: str, imported: Iterable[str]) -> list[str]:
    here = core_part(module)
    allowed = {"", here} if here else {""}
    return [
        f"{module} imports {i}"
        for i in imported
        if layer(i) == "core" and core_part(i) not in allowed | CORE_MAY_IMPORT[here]
    ]


def test_the_core_parts_are_the_ones_with_rules() -> None:
    parts = {core_part(m) for m in MODULES if layer(m) == "core"}
    assert parts == set(CORE_MAY_IMPORT), "a new part of the core: give it rules"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if layer(m) == "core"))
def test_each_core_part_imports_only_the_shared_modules_and_its_rules(module: str) -> None:
    assert core_violations(module, own_imports(module)) == []


def test_the_spark_side_imports_nothing_of_the_service() -> None:
    for path in sorted((ROOT / "jobs").rglob("*.py")):
        for imported in imports_of(path):
            assert imported.split(".")[0] != PACKAGE, f"{path} imports {imported}"


def test_the_checks_catch_what_they_forbid() -> None:
    """The issue's own examples: routes importing an adapter, a loop importing the app,
    the core importing the runtime, and the cycle access -> app -> routes -> access."""
    http, adapter = f"{PACKAGE}.http.event_routes", f"{PACKAGE}.adapters.kafka.committer"
    assert layer_violations(http, [adapter]) == [f"{http} imports {adapter}"]
    assert layer_violations(f"{PACKAGE}.runtime.commit_loop", [f"{PACKAGE}.app"])
    assert layer_violations(f"{PACKAGE}.core.ledger.rules", [f"{PACKAGE}.runtime.commit_loop"])
    assert layer_violations(f"{PACKAGE}.core.ledger.rules", [f"{PACKAGE}.core.offsets"]) == []
    status, rules = f"{PACKAGE}.core.lag.status", f"{PACKAGE}.core.ledger.rules"
    assert core_violations(rules, [status]) == [f"{rules} imports {status}"]
    assert core_violations(status, [rules, f"{PACKAGE}.core.offsets"]) == []
    offsets = f"{PACKAGE}.core.offsets"
    assert core_violations(offsets, [rules]) == [f"{offsets} imports {rules}"]
    cycle = {"access": {"app"}, "app": {"routes"}, "routes": {"access"}, "core": set()}
    assert find_cycle(cycle) == ["access", "app", "routes", "access"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
