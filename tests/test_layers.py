"""Rules of the layout that a test keeps true (read from the source, imports inside
functions included): the pure core and the ports import only the standard library and
the core; the loops and the HTTP layer reach Kafka and the database through ports, never
an adapter; nothing imports the composition root (``service.app``) but the command line;
no production module imports the in-memory doubles of ``service.testing``."""

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


PORTS = {"ports", "store"}
# Adapters: the modules that talk to Kafka or the database.
ADAPTERS = {
    "committer",
    "db_schema",
    "group_report",
    "kafka_admin",
    "kafka_options",
    "lease_store",
    "log_ends",
    "migrate",
    "recovery",
    "shared_store",
    "sql_store",
    "sql_writes",
}
# The lease keeper is a loop too, but still holds its PostgreSQL LISTEN connection and
# the lease store itself (a port for them is the next step of the layout).
LOOPS = {"commit_loop", "lag_monitor", "durable_ledger"}
HTTP = {"access", "api", "api_models", "auth", "body_limit", "refusals", "runtime", "status_api"}
DRIVERS = {"aiokafka", "sqlalchemy", "psycopg", "alembic"}


def service_modules() -> dict[str, set[str]]:
    return {path.stem: imports_of(path) for path in SERVICE.glob("*.py")}


def imports_of(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found - {"__future__"}


def test_the_core_and_the_ports_import_only_the_standard_library_and_the_core() -> None:
    for name in sorted(CORE | PORTS):
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


def test_loops_and_the_http_layer_reach_kafka_and_the_database_only_through_ports() -> None:
    for name, imported in service_modules().items():
        if name not in LOOPS | HTTP:
            continue
        for module in imported:
            parts = module.split(".")
            assert parts[0] not in DRIVERS, f"service.{name} imports {module}"
            if parts[0] == "service" and len(parts) > 1:
                assert parts[1] not in ADAPTERS, f"service.{name} imports {module}"


def test_nothing_imports_the_composition_root_but_the_command_line() -> None:
    for name, imported in service_modules().items():
        if name not in ("app", "cli"):
            assert "service.app" not in imported, f"service.{name} imports service.app"


OBSERVE = {"metrics", "json_logs"}
ENTRY = {"__init__", "app", "cli", "settings"}  # the composition root, its command, config


def test_every_module_is_placed_in_a_layer() -> None:
    placed = CORE | PORTS | ADAPTERS | LOOPS | {"lease_keeper"} | HTTP | OBSERVE | ENTRY
    placed |= {"testing"}
    assert set(service_modules()) == placed, "a new module: place it in a layer above"
