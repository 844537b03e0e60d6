"""The real local Kafka broker for tests and tools.

Not a fake: this drives ``scripts/local-kafka.sh``, which runs Apache Kafka (KRaft) from
Maven Central jars. A test session has a broker of its own (``for_tests``): two test runs
on one machine, or two workers of one run (pytest-xdist), never share one, so none stops
a broker under another's feet.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from harness.machine import ROOT, refuse_in_inner_loop

SCRIPT = ROOT / "scripts" / "local-kafka.sh"
import kafka_metadata  # noqa: E402  (scripts/, on the path by harness.machine)


class BrokerDidNotStart(RuntimeError):
    LOG_LINES = 40

    def __init__(self, broker: LocalBroker, said: str) -> None:
        log = broker.state_dir / "kafka.log"
        try:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-self.LOG_LINES :])
        except OSError:
            tail = "(none was written)"
        super().__init__(
            f"the Kafka broker on {broker.bootstrap} (state in {broker.state_dir}) did not "
            f"start: {said}\n--- the last {self.LOG_LINES} lines of {log}:\n{tail}"
        )


@dataclass(frozen=True)
class LocalBroker:
    bootstrap: str
    port: int
    state_dir: Path
    started_here: bool
    extra_env: tuple[tuple[str, str], ...] = ()  # e.g. the secured listeners' settings

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "LOCAL_KAFKA_PORT": str(self.port),
            "LOCAL_KAFKA_DIR": str(self.state_dir),
            **dict(self.extra_env),
        }

    @property
    def external(self) -> str | None:
        """Its listener off loopback, host:port (``brand_new``'s ``external``), if any."""
        return dict(self.extra_env).get("LOCAL_KAFKA_EXTERNAL")

    def stop(self) -> None:
        subprocess.run([str(SCRIPT), "stop"], env=self.env(), check=True, capture_output=True)

    def start(self) -> None:
        """Start it and wait until it answers; else :class:`BrokerDidNotStart` with the
        script's words and the end of the broker's log (all a CI run leaves to read)."""
        refuse_in_inner_loop("starts a Kafka broker")
        done = subprocess.run(
            [str(SCRIPT), "start"], env=self.env(), capture_output=True, text=True
        )
        if done.returncode != 0:
            raise BrokerDidNotStart(self, done.stderr.strip() or done.stdout.strip())

    def pid(self) -> int:
        return int((self.state_dir / "kafka.pid").read_text())

    def pause(self) -> None:
        """Freeze the broker (SIGSTOP): connections stay open, nothing is answered."""
        os.kill(self.pid(), signal.SIGSTOP)

    def resume(self) -> None:
        with contextlib.suppress(FileNotFoundError, ProcessLookupError, ValueError):
            os.kill(self.pid(), signal.SIGCONT)


def answers(bootstrap: str) -> bool:
    try:
        return bool(kafka_metadata.brokers(bootstrap, timeout=1.0))
    except OSError:
        return False


def brand_new(
    folder: Path, version: str | None = None, *, external: str | None = None
) -> LocalBroker:
    """A broker of its own on a free port, started in the empty ``folder``: Kafka
    ``version`` (``LOCAL_KAFKA_VERSION``; default the POM's), with one more listener at
    ``external`` (host:port, ``LOCAL_KAFKA_EXTERNAL``) for clients off loopback. The
    caller stops it."""
    from harness.machine import free_port

    port = free_port()
    extra = () if version is None else (("LOCAL_KAFKA_VERSION", version),)
    if external is not None:
        extra += (("LOCAL_KAFKA_EXTERNAL", external),)
    broker = LocalBroker(f"127.0.0.1:{port}", port, folder, started_here=True, extra_env=extra)
    broker.start()
    return broker


@dataclass(frozen=True)
class OauthListener:
    """An OAUTHBEARER listener that checks tokens against an issuer's keys (fetched when
    the listener starts: the issuer must answer by then)."""

    jwks_url: str
    audience: str
    issuer: str


@dataclass(frozen=True)
class SecuredBroker:
    """A brand-new broker and its secured listeners, as host:port (None: not opened); its
    PLAINTEXT listener, ``plain``, is always there (tests' set-up and reads)."""

    broker: LocalBroker
    sasl: str | None = None
    ssl: str | None = None
    oauth: str | None = None

    @property
    def plain(self) -> str:
        """The PLAINTEXT listener."""
        return self.broker.bootstrap

    def stop(self) -> None:
        self.broker.stop()


def brand_new_secured(
    folder: Path,
    *,
    users: dict[str, str] | None = None,
    ssl_pem: Path | None = None,
    acls: bool = False,
    oauth: OauthListener | None = None,
) -> SecuredBroker:
    """A broker of its own started in the empty ``folder``, with a SASL listener (SCRAM
    and PLAIN) for ``users`` (name: password), a TLS one serving ``ssl_pem`` (key and
    certificate chain), Kafka's authorizer (``acls``: PLAINTEXT is the super user) and an
    OAUTHBEARER listener, each when asked (``scripts/local-kafka.sh``). The caller stops it."""
    from harness.machine import free_port

    port = free_port()
    env: list[tuple[str, str]] = []
    sasl = ssl = oauth_at = None
    if users:
        sasl_port = free_port()
        sasl = f"127.0.0.1:{sasl_port}"
        users_list = ",".join(f"{name}:{password}" for name, password in users.items())
        env += [("LOCAL_KAFKA_USERS", users_list), ("LOCAL_KAFKA_SASL_PORT", str(sasl_port))]
    if ssl_pem is not None:
        ssl_port = free_port()
        ssl = f"127.0.0.1:{ssl_port}"
        env += [("LOCAL_KAFKA_SSL_PORT", str(ssl_port)), ("LOCAL_KAFKA_SSL_PEM", str(ssl_pem))]
    if acls:
        env.append(("LOCAL_KAFKA_ACLS", "1"))
    if oauth is not None:
        oauth_port = free_port()
        oauth_at = f"127.0.0.1:{oauth_port}"
        env += [
            ("LOCAL_KAFKA_OAUTH_PORT", str(oauth_port)),
            ("LOCAL_KAFKA_OAUTH_JWKS_URL", oauth.jwks_url),
            ("LOCAL_KAFKA_OAUTH_AUDIENCE", oauth.audience),
            ("LOCAL_KAFKA_OAUTH_ISSUER", oauth.issuer),
        ]
    broker = LocalBroker(f"127.0.0.1:{port}", port, folder, started_here=True, extra_env=tuple(env))
    broker.start()
    return SecuredBroker(broker, sasl, ssl, oauth_at)


REUSE = "OFFSET_SIDECAR_TEST_KAFKA"


def for_tests(folder: Path) -> LocalBroker:
    """The broker of one test session: a brand-new one on a free port in the empty
    ``folder``, stopped by the caller; or, with ``OFFSET_SIDECAR_TEST_KAFKA=host:port``, that
    running broker, which is neither started nor stopped here."""
    refuse_in_inner_loop("uses the Kafka broker")
    reuse = os.environ.get(REUSE)
    if reuse:
        if not answers(reuse):
            raise RuntimeError(f"{REUSE}={reuse}: no Kafka broker answers there")
        return LocalBroker(reuse, int(reuse.rsplit(":", 1)[1]), folder, started_here=False)
    return brand_new(folder)


def acquire() -> LocalBroker:
    """For tools run by hand: the broker on ``LOCAL_KAFKA_PORT`` (9092) if one answers,
    else one started there (``make kafka-start``'s)."""
    refuse_in_inner_loop("uses the Kafka broker")
    port = int(os.environ.get("LOCAL_KAFKA_PORT", "9092"))
    bootstrap = f"127.0.0.1:{port}"
    state_dir = Path(os.environ.get("LOCAL_KAFKA_DIR", ROOT / ".local" / "kafka"))
    if answers(bootstrap):
        return LocalBroker(bootstrap, port, state_dir, started_here=False)
    broker = LocalBroker(bootstrap, port, state_dir, started_here=True)
    broker.start()
    return broker


@dataclass(frozen=True)
class Acl:
    """One ALLOW ACL, from any host: ``principal`` (``User:alice``) may do ``operation``
    (READ, DESCRIBE, ...) on the ``resource`` (TOPIC, GROUP, CLUSTER) named ``name``,
    matched as ``pattern`` (LITERAL or PREFIXED)."""

    principal: str
    resource: str
    pattern: str
    name: str
    operation: str


def add_acls(bootstrap: str, acls: list[Acl]) -> None:
    """Add ``acls`` with Kafka's own Admin client (``scripts/java/KafkaAcls.java``, run
    from source on the broker's jars) through ``bootstrap``, a super user's listener."""
    jars = subprocess.run(
        [str(ROOT / "scripts" / "fetch-jars.sh"), "kafka"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    args = [
        f
        for acl in acls
        for f in (acl.principal, acl.resource, acl.pattern, acl.name, acl.operation)
    ]
    done = subprocess.run(
        [
            "java",
            "-cp",
            f"{jars}/*",
            str(ROOT / "scripts" / "java" / "KafkaAcls.java"),
            bootstrap,
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise RuntimeError(f"adding ACLs through {bootstrap} failed: {done.stderr.strip()[-2000:]}")
