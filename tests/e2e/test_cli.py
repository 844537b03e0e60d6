"""The command line a new user meets first: ``offset-sidecar --help`` says how to point it
at Kafka, and every command's help names the settings it reads (each a real setting)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.machine import free_port
from harness.service_process import ServiceProcess
from spark_offset_sidecar import cli
from spark_offset_sidecar.settings import Settings
from tests.support.kubernetes import service_link_variables
from tests.support.service import wait_for

KNOWN = {variable for variable, _default, _meaning in Settings.describe()}


def help_text(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as ended:
        cli.main([*argv, "--help"])
    assert ended.value.code == 0
    return capsys.readouterr().out


def test_the_top_help_says_how_to_reach_kafka_and_lists_every_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = help_text(capsys)
    assert "SIDECAR_KAFKA_BOOTSTRAP_SERVERS" in text
    assert "offset-sidecar settings" in text
    for name in cli.COMMANDS:
        assert name in text


@pytest.mark.parametrize("command", sorted(cli.COMMANDS))
def test_each_commands_help_names_the_settings_it_reads(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    text = help_text(capsys, command)
    reads = cli.COMMANDS[command].reads
    assert set(reads) - {"*"} <= KNOWN, "a command names a setting that does not exist"
    for variable in KNOWN if reads == ("*",) else reads:
        assert variable in text
    if command in ("describe-group", "starting-offsets", "serve"):
        assert "SIDECAR_KAFKA_BOOTSTRAP_SERVERS" in text
    if command == "migrate":
        assert "SIDECAR_DATABASE_URL" in text


def test_serve_alone_is_refused_by_the_checks_of_serving(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The image sets SIDECAR_HOST=0.0.0.0: without tokens, serve is refused; a command
    that listens on nothing (followed calls the service at --url) reads its own settings
    and goes on."""
    monkeypatch.setattr(cli, "configure_logging", lambda *_: None)  # the test's own logs
    monkeypatch.setenv("SIDECAR_HOST", "0.0.0.0")
    monkeypatch.delenv("SIDECAR_TOKENS_FILE", raising=False)
    monkeypatch.delenv("SIDECAR_ALLOW_UNAUTHENTICATED", raising=False)
    assert cli.main(["serve"]) == 2
    assert "SIDECAR_HOST: listening on 0.0.0.0 without" in capsys.readouterr().err
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    assert cli.main(["followed", "--url", url]) == 1
    assert f"cannot reach the service at {url}" in capsys.readouterr().err


def test_a_group_command_without_a_group_is_refused_by_the_parser(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as ended:
        cli.main(["describe-group"])
    assert ended.value.code == 2
    assert "group" in capsys.readouterr().err


def test_follow_with_a_token_and_url_as_the_manual_shows(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    """The chart always has tokens: ``follow`` without one is refused saying which
    variable holds it; with ``OFFSET_SIDECAR_TOKEN`` and ``--url``, as the Kubernetes page
    shows, the folder is followed."""
    token = "cli-test-token-0123456789abcdefghijklmn"
    tokens = tmp_path / "tokens.json"
    tokens.write_text(
        json.dumps({"tokens": [{"name": "ops", "token": token, "write": ["*"], "read": ["*"]}]})
    )
    folder = tmp_path / "checkpoint"
    folder.mkdir()
    service = ServiceProcess(tmp_path, kafka_bootstrap, tokens_file=tokens).start()
    env = {k: v for k, v in os.environ.items() if k != cli.TOKEN_ENV}
    command = [sys.executable, "-m", "spark_offset_sidecar.cli"]
    follow = [*command, "follow", str(folder), "--group", "orders", "--url", service.url]
    try:
        refused = subprocess.run(follow, env=env, capture_output=True, text=True, timeout=60)
        assert refused.returncode == 1
        assert "HTTP 401" in refused.stderr
        assert cli.TOKEN_ENV in refused.stderr, refused.stderr
        with_token = {**env, cli.TOKEN_ENV: token}
        done = subprocess.run(follow, env=with_token, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        listed = subprocess.run(
            [*command, "followed", "--url", service.url],
            env=with_token, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert listed.returncode == 0, listed.stderr
        assert str(folder) in listed.stdout
        # --cluster names the Kafka cluster (this service has one, named "default").
        other = tmp_path / "other-checkpoint"
        on_cluster = [*command, "follow", str(other), "--group", "payments", "--url", service.url]
        named = subprocess.run(
            [*on_cluster, "--cluster", "default"],
            env=with_token, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert named.returncode == 0, named.stderr
        assert json.loads(named.stdout)["cluster"] == "default"
        unknown = subprocess.run(
            [*on_cluster, "--cluster", "us"],
            env=with_token, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert unknown.returncode == 1
        assert "no Kafka cluster is named 'us'" in unknown.stderr, unknown.stderr
    finally:
        service.stop()


def test_serve_starts_beside_kubernetes_service_links(tmp_path: Path, kafka_bootstrap: str) -> None:
    """``helm install sidecar`` in a namespace with a Service named ``sidecar``: the kubelet
    gives the pod the exact variables of tests/fixtures/kubernetes (but ``SIDECAR_PORT``, which
    the chart's ConfigMap sets and which wins over the link's); serve starts, is ready, and
    says once which variables it ignored."""
    service = ServiceProcess(tmp_path, kafka_bootstrap)
    links = {k: v for k, v in service_link_variables().items() if k != "SIDECAR_PORT"}
    service.env.update(links)
    service.start()
    try:
        assert service.http.get("/readyz").status_code == 200
        warnings = [line for line in service.log.read_text().splitlines() if "ignored" in line]
        assert len(warnings) == 1, warnings
        assert all(name in warnings[0] for name in links)
    finally:
        service.stop()


def test_the_upgrade_pages_sqlite_backup_and_restore_as_written(tmp_path: Path) -> None:
    """docs/run/upgrade.md's SQLite steps, /var/lib/sidecar a folder here: the backup taken
    while the service stores checkpoints holds every one it answered before (and no half
    transaction); put back with the service stopped, the service starts on it and holds
    what the backup holds, not what it took in after."""
    from tests.support.backups import Checkpoints, page_blocks, queries_in, run_script

    home = tmp_path / "var-lib-sidecar"
    home.mkdir()
    backup, restore = (
        [command.replace("/var/lib/sidecar", str(home)) for command in block]
        for block in page_blocks(
            "tests/e2e/test_cli.py::test_the_upgrade_pages_sqlite_backup_and_restore_as_written"
        )
    )
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    service = ServiceProcess(home, "broker.invalid:9092").start()
    try:
        with Checkpoints(service.url) as writer:
            wait_for(lambda: len(writer.answered) >= 20, what="20 checkpoints stored")
            before = set(writer.answered)
            said = run_script(backup, tmp_path, env)
            wait_for(lambda: len(writer.answered) >= len(before) + 20, what="20 more")
        copy = home / "sidecar-before-upgrade.db"
        assert said == f"backed up {home / 'sidecar.db'} to {copy}: " + said.split(": ", 1)[1]
        assert said.endswith("integrity ok\n"), said
        held = queries_in(copy)
        assert before <= held <= set(writer.answered), "a stored checkpoint missing"
        after = set(writer.answered) - held
        assert after, "nothing stored after the backup"
        service.stop()
        run_script(restore, tmp_path, env)
        service.start()
        listed = {q["query_id"] for q in service.http.get("/v1/queries").json()}
        assert listed == held
    finally:
        service.stop()
    print(f"the backup held {len(held)} queries; {len(after)} stored after it, gone once restored")
