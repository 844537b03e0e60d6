"""What a service hands its watcher child (``app.watcher_brief``): its settings as given,
secrets included, without the HTTPS files, and its topology. That the child runs with
them and not with its environment's: ``tests/e2e/test_watcher.py``."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from spark_offset_sidecar.adapters.child_process import child_command, frame
from spark_offset_sidecar.app.watcher_brief import WatcherBrief
from spark_offset_sidecar.settings import (
    AuthSettings,
    ClusterSettings,
    CommitSettings,
    DatabaseSettings,
    FollowSettings,
    HttpSettings,
    KafkaSettings,
    LogSettings,
    MetricsSettings,
    Settings,
    StatusSettings,
)
from spark_offset_sidecar.topology import Topology

SECRET = 'pa"ss\\wörd'


def settings_of_every_kind(tmp_path: Path) -> Settings:
    """A value of each kind a setting holds, none its default (a new kind: add it here)."""
    pem = tmp_path / "service.pem"
    pem.write_text("not read")
    return Settings(
        kafka=KafkaSettings(
            bootstrap_servers="a:1, b:2",
            security_protocol="sasl_ssl",
            sasl_username="user",
            sasl_password=SECRET,
            sasl_extensions=(("logicalCluster", "lkc-1"),),
            ssl_cafile=pem,
        ),
        clusters=ClusterSettings(name="main", more=("eu-west",), by_group=(("eu-*", "eu-west"),)),
        more_kafka={"eu-west": KafkaSettings(bootstrap_servers="eu:9092", sasl_password="two")},
        database=DatabaseSettings(url=f"sqlite:///{tmp_path / 'sidecar.db'}"),
        http=HttpSettings(host="0.0.0.0", port=9000, tls_certfile=pem, tls_keyfile=pem),
        auth=AuthSettings(allow_unauthenticated=True, protect_reads=False),
        commits=CommitSettings(min_commit_interval_seconds=0.1 + 0.2),
        status=StatusSettings(lag_read_interval_seconds=1e-3, read_record_times=False),
        metrics=MetricsSettings(groups=("orders-*", "b"), export_kafka_lag=True),
        follow=FollowSettings(storage_options={"s3": {"secret": SECRET, "anon": False}}),
        log=LogSettings(level="debug", format="text"),
    )


def test_a_brief_carries_the_settings_given_in_code_exactly_but_https(tmp_path: Path) -> None:
    settings = settings_of_every_kind(tmp_path)
    topology = Topology.resolve(replicated=False, database=settings.database.url)
    brief = WatcherBrief(settings=settings, topology=topology)
    read = WatcherBrief.model_validate_json(brief.encode())
    plain = settings.http.model_copy(update={"tls_certfile": None, "tls_keyfile": None})
    assert read.settings == settings.model_copy(update={"http": plain})
    assert read.settings.kafka.sasl_secret() == SECRET  # as it is, not masked
    assert read.topology == topology


def test_the_watcher_refuses_a_brief_it_cannot_read_without_showing_it() -> None:
    """Exit 2 with the reason, the brief's values (its secrets) left out of it."""
    topology = {"watcher": "child", "writer": "child", "replicated": False, "database": "sqlite"}
    brief = {"settings": {"kafka": {"sasl_password": "hunter2"}}, "topology": topology, "x": 1}
    done = subprocess.run(
        child_command("watcher", "INFO", "text"),
        env={k: v for k, v in os.environ.items() if not k.startswith("SIDECAR_")},
        input=frame((0, json.dumps(brief).encode())),  # its first request
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert b"offset-sidecar watcher: no brief: Extra inputs are not permitted" in done.stderr
    assert b"hunter2" not in done.stderr + done.stdout
