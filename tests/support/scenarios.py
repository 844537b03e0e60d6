"""Groups in known states on a real service and the real broker, for the tests that
watch them from outside (alerts in Prometheus, the status page in a browser)."""

from __future__ import annotations

from harness.service_process import ServiceProcess
from tests.support.kafka import produce, run_sync, unique_group
from tests.support.service import spark_progress


def three_groups(service: ServiceProcess, bootstrap: str, topic: str) -> tuple[str, str, str]:
    """(healthy, stopped, failing) on ``topic`` (one partition): all three commit its first
    10 records; then records keep arriving and only the healthy group's job keeps up; the
    failing group's event also names a partition the topic does not have, so Kafka refuses
    its commit, every retry. With a short SIDECAR_STATUS_STOP_AFTER_SECONDS the stopped
    group's status becomes STOP, and the failing group's ERR."""
    healthy, stopped, failing = (unique_group(name) for name in ("healthy", "stopped", "failing"))
    run_sync(produce(bootstrap, topic, 10))

    def post(group: str, batch: int, offsets: dict[str, dict[str, int]]) -> None:
        answer = service.post_progress(group, spark_progress(batch, offsets, query=group))
        assert answer.status_code == 200, answer.text

    post(healthy, 0, {topic: {"0": 10}})
    post(stopped, 0, {topic: {"0": 10}})
    post(failing, 0, {topic: {"0": 10, "7": 1}})
    for batch in range(1, 4):
        run_sync(produce(bootstrap, topic, 5, start=5 + 5 * batch))
        post(healthy, batch, {topic: {"0": 10 + 5 * batch}})
    return healthy, stopped, failing
