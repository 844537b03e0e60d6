"""The manual's shell commands, run as the manual shows them, on a real broker and a real
service: the getting-started path, the API example and the operating pages (every
runbook's check, the status and metrics pages, a lost checkpoint's offsets). Only the
addresses, names and token are put in (the manual's ``sidecar:8000`` and ``GROUP`` are
the reader's own); a line whose program cannot run here is named, never skipped quietly.
``tests/unit/test_docs.py`` holds every shell block of the manual to naming its test."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harness.kafka_broker import answers
from harness.machine import ROOT, free_port
from harness.service_process import ServiceProcess
from tests.support import manual
from tests.support.kafka import committed_offsets, create_topics, run_sync, unique_group
from tests.support.service import spark_progress, wait_for

pytestmark = pytest.mark.kafka

DOCS = ROOT / "docs"
# Programs of a Kafka distribution, not on this machine (the broker comes as jars).
NOT_HERE = {"kafka-configs.sh", "kafka-acls.sh"}
TOKEN = "docs-test-token-0123456789abcdefghijkl"
# How the runbooks run a command in the chart's pod (tests/e2e/test_helm_chart.py checks
# that the chart names its Deployment so).
IN_THE_POD = "kubectl -n platform exec deploy/spark-offset-sidecar -- "
RUNBOOKS_TEST = "test_the_runbooks_commands_answer_on_a_real_service"


def shell_blocks(page: Path) -> list[list[str]]:
    return [block.commands for block in manual.shell_blocks(page)]


def run(command: str, env: dict[str, str], *, cwd: Path = ROOT) -> str:
    done = subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def shell_env(**extra: str) -> dict[str, str]:
    """The user's environment with this virtualenv's ``offset-sidecar`` on the PATH."""
    path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    return {**os.environ, "PATH": path, **extra}


@pytest.fixture
def service(tmp_path: Path, kafka_bootstrap: str) -> Iterator[ServiceProcess]:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(
        json.dumps({"tokens": [{"name": "ops", "token": TOKEN, "write": ["*"], "read": ["*"]}]})
    )
    process = ServiceProcess(
        tmp_path, kafka_bootstrap, tokens_file=tokens, lag_read_interval_seconds=1
    ).start()
    try:
        yield process
    finally:
        process.stop()


def test_the_runbooks_commands_answer_on_a_real_service(
    service: ServiceProcess, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic, group = new_topic(2), unique_group("runbook")
    headers = {"Authorization": f"Bearer {TOKEN}"}
    answer = service.http.post(
        "/v1/progress",
        json={"group_id": group, "progress": spark_progress(3, {topic: {"0": 0, "1": 0}})},
        headers=headers,
    )
    assert answer.status_code == 200, answer.text
    wait_for(lambda: committed_offsets(kafka_bootstrap, group), what="the group committed")
    wait_for(
        lambda: service.http.get(f"/v1/status/{group}", headers=headers).status_code == 200,
        what="the group's status",
    )
    wait_for(
        lambda: f'consumergroup="{group}"' in service.http.get("/metrics").text,
        what="the group's series",
    )
    query = answer.json()["query_id"]
    env = shell_env(TOKEN=TOKEN, SIDECAR_KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap)
    ran: list[str] = []
    # Every block of the operating pages that names this test (a block that changes the
    # service, such as releasing a query, says why it is not run here).
    for page in sorted((DOCS / "operate").rglob("*.md")):
        for block in manual.shell_blocks(page):
            if RUNBOOKS_TEST not in block.above:
                continue
            for command in block.commands:
                # A line continued by a trailing backslash is one line to the shell.
                command = re.sub(r"\s*\n\s*", " ", command)
                # In the pod (kubectl exec) is here: this service's settings in the env.
                command = command.removeprefix(IN_THE_POD)
                program = command.split()[0]
                if program in NOT_HERE:
                    continue
                assert program in {"curl", "offset-sidecar"}, f"{page.name}: {command}"
                line = (
                    command.replace("http://127.0.0.1:8000", service.url)
                    .replace("QUERY_ID", query)
                    .replace("orders-to-parquet", group)
                )
                line = re.sub(r"\bGROUP\b", group, line)
                out = run(line, env)
                if "/readyz" in line:
                    assert out.startswith("ok"), out
                elif line.endswith("| wc -c"):  # a scrape's size, in bytes
                    assert int(out) > 0, f"{page.name}: {line} -> {out}"
                elif "/metrics" in line:
                    assert f'consumergroup="{group}"' in out, f"{page.name}: {line} -> {out}"
                elif program == "curl":
                    body = json.loads(out)
                    assert "outcome" not in body, f"{page.name}: {line} -> {out}"
                else:
                    assert group in out or topic in out, f"{page.name}: {line} -> {out}"
                ran.append(f"{page.name}: {program}")
    assert len(ran) >= 12, ran


def test_the_api_example_is_accepted_and_read_back(
    tmp_path: Path, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic, group = new_topic(2), unique_group("api-example")
    process = ServiceProcess(tmp_path, kafka_bootstrap).start()
    try:
        (block,) = shell_blocks(DOCS / "api" / "index.md")
        env = shell_env()
        outputs = []
        for command in block:
            line = (
                command.replace("localhost:8000", process.url)
                .replace("localhost:9092", kafka_bootstrap)
                .replace("orders-to-parquet", group)
                .replace("[orders]", f"[{topic}]")
                .replace('"orders"', f'"{topic}"')
            )
            outputs.append(run(line, env))
        assert json.loads(outputs[0])["outcome"] == "accepted", outputs[0]
        assert json.loads(outputs[1])["group_id"] == group, outputs[1]
        assert f'topic "{topic}" with 2 partitions' in outputs[2], outputs[2]
        wait_for(
            lambda: (
                committed_offsets(kafka_bootstrap, group) == {(topic, 0): 1042, (topic, 1): 977}
            ),
            what="the example's offsets in Kafka",
        )
    finally:
        process.stop()


def test_five_minutes_to_a_committed_group(tmp_path: Path) -> None:
    """Getting started: a broker by ``scripts/local-kafka.sh`` in an empty folder, the
    service by ``offset-sidecar serve``, a job's first batch (posted as its listener
    posts it), then ``describe-group`` and the status, exactly as the page shows them."""
    start, look = shell_blocks(DOCS / "getting-started.md")[1:3]
    kafka_port, port = free_port(), free_port()
    env = shell_env(
        LOCAL_KAFKA_PORT=str(kafka_port),
        LOCAL_KAFKA_DIR=str(tmp_path / "kafka"),  # empty: a brand-new broker
        SIDECAR_PORT=str(port),
        SIDECAR_KAFKA_BOOTSTRAP_SERVERS=f"127.0.0.1:{kafka_port}",
        SIDECAR_DATABASE_URL=f"sqlite:///{tmp_path / 'sidecar.db'}",
    )
    broker_line, serve_line = start
    assert serve_line.startswith(".venv/bin/offset-sidecar serve &"), serve_line
    run(broker_line, env)
    server = None
    try:
        assert answers(f"127.0.0.1:{kafka_port}")
        server = subprocess.Popen(
            ["bash", "-c", serve_line.replace("&", "").split("#")[0]],
            cwd=ROOT,
            env=env,
            stdout=(tmp_path / "serve.log").open("wb"),
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        probe = ["curl", "-sf", f"{url}/readyz"]
        wait_for(lambda: subprocess.run(probe, capture_output=True).returncode == 0, what="serve")
        run_sync(create_topics(f"127.0.0.1:{kafka_port}", ["my-topic"], 2))
        progress = spark_progress(1, {"my-topic": {"0": 1, "1": 1}})
        body = json.dumps({"group_id": "my-job", "progress": progress})
        posted = f"curl -sf -X POST -H 'content-type: application/json' -d '{body}'"
        run(f"{posted} {url}/v1/progress", env)
        described, status = (line.replace("127.0.0.1:8000", f"127.0.0.1:{port}") for line in look)
        wait_for(lambda: "my-topic" in run(described, env), timeout=60, what="describe-group")
        rows = [
            line.split() for line in run(described, env).splitlines() if line.startswith("my-job")
        ]
        assert sorted(row[2:4] for row in rows) == [["0", "1"], ["1", "1"]], rows
        wait_for(lambda: json.loads(run(status, env)).get("group") == "my-job", what="status")
    finally:
        if server is not None:
            server.terminate()
            server.wait(30)
        run("scripts/local-kafka.sh stop", env)
