"""ProcessWriter: the ledger's batches written by a child process, on a SQLite file and on a
real PostgreSQL server; the child's errors come back as ``persist`` raises them, and a
child lost with a batch unanswered is an outcome the ledger resolves from the database."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from harness.processes import alive
from spark_offset_sidecar.adapters.child_process import child_command
from spark_offset_sidecar.adapters.sql.store import SqlStore
from spark_offset_sidecar.adapters.sql.writer_process import ProcessWriter
from spark_offset_sidecar.core.backoff import Backoff
from spark_offset_sidecar.core.ledger.changes import (
    CheckpointCompleted,
    Decision,
    Outcome,
    QueryRegistered,
)
from spark_offset_sidecar.core.ledger.rules import Ledger
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.errors import StoreError, StoreUnavailable, WriteOutcomeUnknown
from spark_offset_sidecar.ports.store import LoadedRows
from spark_offset_sidecar.runtime.durable_ledger import DurableLedger
from tests.support.kafka import run_sync
from tests.support.service import wait_for

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
# The real child, ending (exit code 3) right after it wrote its ``n``-th batch: a child
# lost between its commit and its answer.
ENDS_AFTER_WRITING = """
import os, sys
from spark_offset_sidecar import child
from spark_offset_sidecar.adapters.sql import writer_process
written, real = [0], writer_process._persisted
def persisted(store, changes):
    reply = real(store, changes)
    written[0] += 1
    if written[0] == int(sys.argv[4]):
        os._exit(3)
    return reply
writer_process._persisted = persisted
child.main()
"""
# The program a service starts (``child``'s writer), logging as a quiet service would.
CHILD = child_command("writer", "WARNING", "text")

# How the child ended, as the supervisor names it ("was killed by SIGKILL", "exited with
# status 3"; status 255 where something else reaped it first: asyncio then cannot know).
ENDED = r"writer process (was killed by \w+|exited with status \d+) before answering a batch of \d+"


def ends_after_writing(batches: int) -> tuple[str, ...]:
    return (sys.executable, "-c", ENDS_AFTER_WRITING, *CHILD[-3:], str(batches))


def test_batches_written_by_the_child_are_what_a_new_ledger_loads(store: SqlStore) -> None:
    ledger = Ledger()

    async def scenario() -> int | None:
        writer = ProcessWriter(store, CHILD)
        await writer.start()
        deciders: tuple[Callable[[], Decision], ...] = (
            lambda: ledger.decide_progress("q1", "g1", "r", 3, {T0: 30, T1: 31}, 1.0),
            lambda: ledger.decide_snapshot("q1", "g1", 5, "r", {T0: 50}, 2.0),
            lambda: ledger.decide_progress("q2", "g2", None, 0, {T0: 1}, 3.0),
        )
        for decide in deciders:
            decision = decide()
            await writer.write(decision.changes)
            ledger.apply(decision)
        request = ledger.take("g1", 4.0)
        assert request is not None
        change = ledger.commit_result(request, 5.0)
        await writer.write([change])
        ledger.apply_change(change)
        pid = writer.pid
        await writer.close()
        assert writer.pid is None
        return pid

    pid = run_sync(scenario())
    assert pid is not None
    assert pid != os.getpid()
    stored = store.load()
    queries = {q.query_id: q for q in stored.queries}
    groups = {g.group_id: g for g in stored.groups}
    assert (queries["q1"].last_completed_id, list(queries["q1"].pending)) == (3, [5])
    assert queries["q1"].pending[5].offsets == {T0: 50}
    committed = groups["g1"].committed
    assert committed is not None
    assert (committed.checkpoint_id, committed.offsets) == (3, {T0: 30, T1: 31})
    assert groups["g2"].slot is not None
    assert groups["g2"].slot.offsets == {T0: 1}


def test_a_refused_batch_comes_back_as_the_store_error_and_the_child_writes_on(
    store: SqlStore,
) -> None:
    """A query registered twice breaks the primary key: the batch is refused by name and
    rolled back whole, as ``persist`` in a thread would; the same child writes the next."""
    ledger = Ledger()

    async def scenario() -> None:
        writer = ProcessWriter(store, CHILD)
        await writer.start()
        await writer.write(ledger.decide_progress("q", "g", "r", 1, {T0: 10}, 1.0).changes)
        other = ledger.decide_progress("q2", "g3", "r", 1, {T0: 5}, 2.0)
        with pytest.raises(StoreError, match=r"refused writing: .*(UNIQUE|unique|duplicate)"):
            await writer.write([*other.changes, QueryRegistered("q", "g2", 2.0)])
        await writer.write(other.changes)
        assert writer.started == 1, "a refusal is the batch's, not the child's"
        await writer.close()

    run_sync(scenario())
    assert {q.query_id for q in store.load().queries} == {"q", "q2"}


def test_a_database_that_takes_no_writes_is_unavailable_through_the_child(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    SqlStore(f"sqlite:///{path}").migrate()
    read_only = SqlStore(f"sqlite:///file:{path}?mode=ro&uri=true")

    async def scenario() -> None:
        writer = ProcessWriter(read_only, CHILD)
        await writer.start()
        decision = Ledger().decide_progress("q", "g", "r", 1, {T0: 10}, 1.0)
        with pytest.raises(StoreUnavailable, match="readonly") as raised:
            await writer.write(decision.changes)
        assert not isinstance(raised.value, WriteOutcomeUnknown)
        await writer.close()

    run_sync(scenario())


def test_a_child_killed_while_idle_is_an_unknown_outcome_then_a_new_child(
    store: SqlStore,
) -> None:
    ledger = Ledger()
    first = ledger.decide_progress("q", "g", "r", 1, {T0: 10}, 1.0)

    async def scenario() -> None:
        lost: list[None] = []
        writer = ProcessWriter(store, CHILD, on_lost=lambda: lost.append(None))
        await writer.start()
        await writer.write(first.changes)
        ledger.apply(first)
        assert writer.pid is not None
        os.kill(writer.pid, signal.SIGKILL)
        second = ledger.decide_progress("q", "g", "r", 2, {T0: 20}, 2.0)
        with pytest.raises(WriteOutcomeUnknown, match=ENDED) as raised:
            await writer.write(second.changes)
        stored = raised.value.stored
        assert isinstance(stored, LoadedRows)
        assert (stored.query_ids, stored.group_ids) == (frozenset({"q"}), frozenset({"g"}))
        (group,) = stored.stored.groups
        assert group.slot is not None
        assert group.slot.checkpoint_id == 1, "the rows as the database holds them"
        assert len(lost) == 1
        await writer.write(second.changes)
        assert writer.started == 2
        assert len(lost) == 1, "counted once, when lost"
        await writer.close()

    run_sync(scenario())
    (group,) = store.load().groups
    assert group.slot is not None
    assert group.slot.checkpoint_id == 2


def test_a_child_that_ends_while_starting_is_unavailable_and_nothing_is_sent(
    store: SqlStore,
) -> None:
    """A child killed before it opened the database: the batch was never handed over, so
    its outcome is known (not written), and the next write starts another child."""
    decision = Ledger().decide_progress("q", "g", "r", 1, {T0: 10}, 1.0)

    async def scenario() -> None:
        lost: list[None] = []
        writer = ProcessWriter(
            store,
            (sys.executable, "-c", "import os; os._exit(7)"),
            on_lost=lambda: lost.append(None),
        )
        with pytest.raises(StoreUnavailable, match=r"writer process exited with status \d+ "
                           r"while starting") as raised:  # fmt: skip
            await writer.write(decision.changes)
        assert not isinstance(raised.value, WriteOutcomeUnknown)
        assert (writer.pid, len(lost)) == (None, 1)
        writer.supervisor.command = CHILD  # started again after its backoff (1 s)
        await writer.write(decision.changes)
        assert writer.started == 2
        await writer.close()

    run_sync(scenario())
    assert [q.query_id for q in store.load().queries] == ["q"]


def test_the_services_writer_program_logs_as_the_service_and_a_bug_fails_its_batch_only(
    store: SqlStore, tmp_path: Path
) -> None:
    """``child``'s writer, the program a service starts: its lines in the service's
    format (JSON here) naming the ``writer`` process; a batch whose rows cannot be made
    (a bug) is that batch's ``StoreError``, and the same child writes the next one."""
    log = tmp_path / "writer.log"
    program = child_command("writer", "INFO", "json")
    wrapped = ("sh", "-c", f'exec "$@" 2>{log}', "sh", *program)
    broken = CheckpointCompleted(None, 1.0)  # type: ignore[arg-type]
    decision = Ledger().decide_progress("q", "g", "r", 1, {T0: 10}, 1.0)

    async def scenario() -> None:
        writer = ProcessWriter(store, wrapped)
        await writer.start()
        with pytest.raises(StoreError, match="AttributeError"):
            await writer.write([broken])
        await writer.write(decision.changes)
        assert writer.started == 1
        await writer.close()

    run_sync(scenario())
    assert [q.query_id for q in store.load().queries] == ["q"]
    (line,) = [json.loads(text) for text in log.read_text().splitlines()]  # nothing else
    assert (line["process"], line["level"], line["message"]) == (
        "writer",
        "ERROR",
        "writing a batch failed",
    )
    assert "AttributeError" in line["exception"]


# A parent that starts a writer, prints the writer's pid, then has it write one batch.
PARENT = """
import asyncio, sys
from spark_offset_sidecar.adapters.sql.store import SqlStore
from spark_offset_sidecar.adapters.sql.writer_process import ProcessWriter
from spark_offset_sidecar.adapters.child_process import child_command
from spark_offset_sidecar.core.ledger.rules import Ledger
from spark_offset_sidecar.core.offsets import TopicPartition
async def main():
    writer = ProcessWriter(SqlStore(sys.argv[1]), child_command("writer", "WARNING", "text"))
    await writer.start()
    print(writer.pid, flush=True)
    decision = Ledger().decide_progress("q", "g", "r", 1, {TopicPartition("t", 0): 1}, 1.0)
    await writer.write(decision.changes)
asyncio.run(main())
"""


def _sleeping(pid: int) -> bool:
    """Whether ``pid`` waits in a sleep (SQLite's busy handler), not in a read of its input
    (system call 0) nor running."""
    call = Path(f"/proc/{pid}/syscall").read_text().split()[0]
    return call not in ("0", "running")


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")
def test_a_writer_dies_with_its_parent_and_its_write_with_it(tmp_path: Path) -> None:
    """The writer waits for a lock this test holds, with a batch under way, when its
    parent is SIGKILLed: the kernel kills the writer at once (``PR_SET_PDEATHSIG``), so
    the batch is not committed once the lock is free, behind the back of the parent's
    successor that may have loaded the database meanwhile."""
    store = SqlStore(f"sqlite:///{tmp_path / 'db.sqlite'}")
    store.migrate()
    holder = sqlite3.connect(tmp_path / "db.sqlite", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # the write lock, held
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, store.url], stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        wait_for(lambda: _sleeping(child), timeout=10, what="the writer waiting for the lock")
        parent.kill()
        parent.wait(10)
        holder.execute("ROLLBACK")  # the lock free: a writer still alive would commit now
        wait_for(lambda: not alive(child), timeout=10, what="the writer ending with its parent")
    finally:
        parent.kill()
        parent.wait(10)
        holder.close()
    assert store.load().queries == [], "the batch under way was not committed"


def test_a_cancelled_write_ends_its_child_so_no_late_answer_is_read(store: SqlStore) -> None:
    ledger = Ledger()

    async def scenario() -> None:
        writer = ProcessWriter(store, CHILD)
        await writer.start()
        cut = asyncio.ensure_future(
            writer.write(ledger.decide_progress("q1", "g1", "r", 1, {T0: 1}, 1.0).changes)
        )
        await asyncio.sleep(0)
        cut.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cut
        assert writer.pid is None, "the child that may still answer is gone"
        await writer.write(ledger.decide_progress("q2", "g2", "r", 1, {T0: 2}, 2.0).changes)
        assert writer.started == 2
        await writer.close()

    run_sync(scenario())
    assert "q2" in {q.query_id for q in store.load().queries}


def progress(durable: DurableLedger, batch: int, offset: int) -> asyncio.Future[Decision]:
    def decide(ledger: Ledger) -> Decision:
        return ledger.decide_progress("q", "g", "r", batch, {T0: offset}, float(batch))

    return asyncio.ensure_future(durable.record(decide, query_id="q", group_id="g"))


def test_a_batch_written_by_a_child_lost_before_answering_is_taken_in_as_stored(
    store: SqlStore,
) -> None:
    """The child commits batch 2 and ends before answering: the event hears 503 (its
    caller retries), memory rolled back, and then takes in the rows as stored, so the
    retry is a duplicate, not a second write of the same checkpoint."""

    async def scenario() -> None:
        writer = ProcessWriter(store, ends_after_writing(2))
        thread = ThreadPoolExecutor(1)
        durable = await DurableLedger.open(
            store, thread=thread, writer=writer, max_pending=100, backoff=Backoff(0.5, 10)
        )
        await writer.start()
        assert (await progress(durable, 1, 10)).outcome is Outcome.ACCEPTED
        with pytest.raises(WriteOutcomeUnknown, match=ENDED):
            await progress(durable, 2, 20)
        group = durable.ledger.groups["g"]
        assert group.slot is not None
        assert group.slot.checkpoint_id == 2, "memory holds what the database does"
        assert durable.ledger.queries["q"].last_completed_id == 2
        again = await progress(durable, 2, 20)
        assert again.outcome is Outcome.DUPLICATE
        assert (await progress(durable, 3, 30)).outcome is Outcome.ACCEPTED
        assert writer.started == 2
        await durable.close()
        assert writer.pid is None, "closed with the ledger"

    run_sync(scenario())
    (group,) = store.load().groups
    assert group.slot is not None
    assert group.slot.checkpoint_id == 3
