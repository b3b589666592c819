"""``jobs.fanout`` on the real Redis, with units done in this process: each unit done once and
merged in order, a unit whose holder vanished taken again after its lease, the first result
kept, a failed unit failing the run, a run resumed with the units already done, and the tally.

Helpers are threads running ``help_run`` (what the helper task runs), so the queueing of helper
messages is replaced; the Celery side is covered by ``test_split_jobs``.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from tests.support.processes import RedisServer, free_port
from workbench.config import Config
from workbench.jobs import fanout
from workbench.jobs.base import JobFailed
from workbench.services import Services

KIND = "test_squares"


class Squares:
    """A unit is a list of numbers; its result their squares. Counts what this process did."""

    threads = 2
    done: list[int] = []
    helped: list[int] = []  # units each helper did
    lock = threading.Lock()

    def __init__(self, svc: Services, entity_id: str, head: dict[str, Any]) -> None:
        if head.get("declined"):
            raise fanout.Decline("not with these inputs")
        self.delay = float(head.get("delay", 0.0))
        self.fail_on = head.get("failOn")

    def unit(self, payload: list[int]) -> dict[str, Any]:
        time.sleep(self.delay)
        if self.fail_on in payload:
            raise ValueError(f"cannot square {self.fail_on}")
        with self.lock:
            Squares.done.extend(payload)
        return {"squares": [n * n for n in payload], fanout.TALLY: {"numbers": len(payload)}}

    def close(self) -> None:
        pass


@pytest.fixture
def svc(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[Services]:
    services = Services(Config.from_env(dict(env, WORKBENCH_LEASE_SECONDS="1")))
    fanout.KINDS[KIND] = Squares
    Squares.done = []
    helpers: list[threading.Thread] = []
    Squares.helped = []

    def queue_helper(kind_name: str, entity_id: str, run: str) -> None:
        def help_once() -> None:
            Squares.helped.append(fanout.help_run(services, kind_name, entity_id, run))

        thread = threading.Thread(target=help_once, daemon=True)
        helpers.append(thread)
        thread.start()

    monkeypatch.setattr(fanout, "queue_helper", queue_helper)
    yield services
    for thread in helpers:
        thread.join(10)
    fanout.KINDS.pop(KIND, None)


def units(count: int, size: int = 3) -> list[list[int]]:
    return [list(range(n * size, n * size + size)) for n in range(count)]


def test_every_unit_is_done_once_and_merged_in_order(svc: Services) -> None:
    payloads = units(20)
    out = fanout.spread(svc, KIND, uuid.uuid4().hex, {"delay": 0.02}, payloads,
                        [len(p) for p in payloads], None)
    assert [o["squares"] for o in out] == [[n * n for n in p] for p in payloads]
    assert sorted(Squares.done) == list(range(60))  # each number once, by whoever took it
    assert not list(svc.redis.scan_iter("wb:fan:test_squares:*"))  # merged: keys gone


def test_a_unit_whose_holder_vanished_is_taken_again_after_its_lease(svc: Services) -> None:
    """Another "process" takes unit 0 and is never heard of again (no result, no renewal): the
    parent takes it once its 1 s lease lapses, and the run completes."""
    entity = uuid.uuid4().hex
    payloads = units(3)
    keys = fanout.Keys(fanout.run_name(KIND, entity, {}, payloads))
    fanout.publish(svc.redis, keys, {}, payloads)
    ghost = fanout.Crew(svc.redis, keys, Squares(svc, entity, {}), 1.0, waits=False)
    assert ghost.take() == ("0", [0, 1, 2])
    started = time.monotonic()
    out = fanout.spread(svc, KIND, entity, {}, payloads, [3, 3, 3], None)
    assert time.monotonic() - started >= 0.9  # waited for the lease
    assert [o["squares"] for o in out] == [[0, 1, 4], [9, 16, 25], [36, 49, 64]]


def test_the_first_result_of_a_unit_is_kept(svc: Services) -> None:
    entity = uuid.uuid4().hex
    payloads = units(1)
    keys = fanout.Keys(fanout.run_name(KIND, entity, {}, payloads))
    fanout.publish(svc.redis, keys, {}, payloads)
    first = fanout.Crew(svc.redis, keys, Squares(svc, entity, {}), 1.0, waits=False)
    second = fanout.Crew(svc.redis, keys, Squares(svc, entity, {}), 1.0, waits=False)
    assert first.take() is not None
    assert second.take() is None  # held under a live lease: nobody else takes it
    time.sleep(1.1)
    assert second.take() == ("0", [0, 1, 2])  # the lease lapsed: taken again
    first.take(("0", {"squares": "first"}), more=False)  # the slow first holder finishes
    second.take(("0", {"squares": "second"}), more=False)  # done twice: the first result stays
    assert fanout.results(svc.redis, keys, 1) == [{"squares": "first"}]
    svc.redis.delete(*keys.all())


def test_a_unit_that_fails_for_good_fails_the_run_with_its_reason(svc: Services) -> None:
    payloads = units(10)
    with pytest.raises(fanout.UnitFailed, match="cannot square 13"):
        fanout.spread(svc, KIND, uuid.uuid4().hex, {"failOn": 13, "delay": 0.05}, payloads,
                      [3] * 10, None)
    assert 13 not in Squares.done
    assert len(Squares.done) < 30  # the others stopped taking units
    assert not list(svc.redis.scan_iter("wb:fan:test_squares:*"))
    assert issubclass(fanout.UnitFailed, JobFailed)  # the job ends ERROR with the reason


def test_a_unit_the_parent_itself_fails_for_good_fails_the_run_the_same_way(
        svc: Services) -> None:
    """One unit only: the parent's own thread takes it (no helper can be first), and its failure
    is the run's ``UnitFailed`` with the reason, the run's keys gone, as on a helper."""
    with pytest.raises(fanout.UnitFailed, match="cannot square 13"):
        fanout.spread(svc, KIND, uuid.uuid4().hex, {"failOn": 13}, [[13]], [1], None)
    assert not list(svc.redis.scan_iter("wb:fan:test_squares:*"))


def test_a_run_again_keeps_the_units_already_done_and_sums_the_tally(svc: Services) -> None:
    entity = uuid.uuid4().hex
    payloads = units(4)
    keys = fanout.Keys(fanout.run_name(KIND, entity, {}, payloads))
    assert fanout.publish(svc.redis, keys, {}, payloads) == 0
    crew = fanout.Crew(svc.redis, keys, Squares(svc, entity, {}), 5.0, waits=False)
    for _ in range(2):  # an earlier run did two units, then its worker died
        number, payload = crew.take() or ("", [])
        crew.take((number, Squares(svc, entity, {}).unit(payload)), more=False)
    assert fanout.tally(svc.redis, keys) == {"numbers": 6}
    Squares.done = []
    assert fanout.publish(svc.redis, keys, {}, payloads) == 2
    out = fanout.spread(svc, KIND, entity, {}, payloads, [3] * 4, None)
    assert sorted(Squares.done) == list(range(6, 12))  # only the two units not done
    assert [o["squares"][0] for o in out] == [0, 9, 36, 81]


def test_a_run_gone_from_redis_is_an_outage_for_its_parent(svc: Services) -> None:
    r: redis.Redis = svc.redis
    entity = uuid.uuid4().hex
    payloads = units(2)
    keys = fanout.Keys(fanout.run_name(KIND, entity, {}, payloads))
    fanout.publish(r, keys, {}, payloads)
    crew = fanout.Crew(r, keys, Squares(svc, entity, {}), 5.0, waits=True)
    r.delete(*keys.all())  # Redis restarted without its data
    with pytest.raises(fanout.RunGone):
        crew.take()
    assert isinstance(fanout.RunGone("x"), redis.exceptions.ConnectionError)  # waited out


def test_a_helper_that_declines_takes_no_unit(svc: Services) -> None:
    """A helper whose view of the inputs differs declines (``fanout.Decline``): the parent,
    which brings its own unit worker, does every unit."""
    entity = uuid.uuid4().hex
    payloads = units(6)
    own = Squares(svc, entity, {"delay": 0.05})
    out = fanout.spread(svc, KIND, entity, {"declined": True, "delay": 0.05}, payloads,
                        [3] * 6, None, own=own)
    assert [o["squares"][0] for o in out] == [0, 9, 36, 81, 144, 225]
    time.sleep(0.2)
    assert Squares.helped == [0]  # one helper was asked, and did nothing


def test_a_run_replaced_by_another_of_its_entity_is_stopped_and_forgotten(
        svc: Services) -> None:
    """The job ran again with other units (its inputs changed meanwhile): the earlier run is
    stopped (its helpers take no more units), its keys are deleted and what its units spent is
    handed to the caller, who counts it (an LLM judgment's usage)."""
    entity = uuid.uuid4().hex
    earlier = fanout.Keys(fanout.run_name(KIND, entity, {}, units(4)))
    fanout.publish(svc.redis, earlier, {}, units(4))
    crew = fanout.Crew(svc.redis, earlier, Squares(svc, entity, {}), 5.0, waits=False)
    for _ in range(2):
        number, payload = crew.take() or ("", [])
        crew.take((number, Squares(svc, entity, {}).unit(payload)), more=False)
    spent: list[dict[str, int]] = []
    out = fanout.spread(svc, KIND, entity, {}, units(3), [3] * 3, None, retired=spent.append)
    assert [o["squares"][0] for o in out] == [0, 9, 36]
    assert spent == [{"numbers": 6}]
    assert not list(svc.redis.scan_iter(f"wb:fan:test_squares:{entity}:*"))
    with pytest.raises(fanout.RunGone):  # its helpers find it gone and stop
        crew.take()


def test_units_done_while_redis_restarts_are_kept_and_done_once(
        env: dict[str, str], tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Redis (with its append-only file) is stopped for 2 s while a run's units are being done
    here and by a helper: every call waits it out in place, so every unit is done exactly once
    and the run ends as if nothing happened."""
    server = RedisServer(free_port(), str(tmp_path))
    try:
        services = Services(Config.from_env(dict(env, REDIS_URL=server.url,
                                                 WORKBENCH_LEASE_SECONDS="30")))
        fanout.KINDS[KIND] = Squares
        Squares.done = []
        helpers: list[threading.Thread] = []

        def queue_helper(kind_name: str, entity_id: str, run: str) -> None:
            if helpers:  # one helper: a second "worker process"
                return
            thread = threading.Thread(target=fanout.help_run,
                                      args=(services, kind_name, entity_id, run), daemon=True)
            helpers.append(thread)
            thread.start()

        monkeypatch.setattr(fanout, "queue_helper", queue_helper)
        payloads = units(40)
        box: dict[str, Any] = {}
        runner = threading.Thread(target=lambda: box.update(out=fanout.spread(
            services, KIND, uuid.uuid4().hex, {"delay": 0.3}, payloads, [3] * 40, None)))
        runner.start()
        time.sleep(1.2)  # some units done and stored (the file is written every second)
        done_before = len(Squares.done)
        server = server.restart(15, down=2)  # SIGTERM: it saves and exits
        runner.join(60)
        for thread in helpers:
            thread.join(10)
        assert 0 < done_before < 120
        assert [o["squares"] for o in box["out"]] == [[n * n for n in p] for p in payloads]
        assert sorted(Squares.done) == list(range(120))  # each number once
    finally:
        fanout.KINDS.pop(KIND, None)
        server.stop()
