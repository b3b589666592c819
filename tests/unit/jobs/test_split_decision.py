"""Whether a job is split (``fanout.worth_splitting``): from its estimated work and the free
workers when ``WORKBENCH_SPLIT_QUERIES`` is unset, from its query count alone when it is set."""

from __future__ import annotations

import json
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
import redis

from workbench.config import Config, ConfigError
from workbench.jobs import fanout


class FakeRedis:
    """The two reads ``free_slots`` makes: supervisor records and lease keys."""

    def __init__(self, supervisors: list[str], leases: int, down: bool = False) -> None:
        self.values = {f"workbench:supervisor:h:{n}": json.dumps(
            {"host": "h", "pid": n, "queue": queue}) for n, queue in enumerate(supervisors)}
        self.leases = [f"workbench:lease:task:{n}" for n in range(leases)]
        self.down = down

    def scan_iter(self, pattern: str, count: int = 10) -> Iterator[str]:
        if self.down:
            raise redis.exceptions.ConnectionError("down")
        if pattern.startswith("workbench:supervisor:"):
            yield from self.values
        elif pattern.startswith("workbench:lease:"):
            yield from self.leases

    def get(self, key: str) -> Any:
        return self.values.get(key)


def svc(split: str | None, supervisors: list[str] | None = None, leases: int = 1,
        concurrency: int = 2, down: bool = False) -> Any:
    env = {"WORKBENCH_QUEUE": "q", "WORKBENCH_WORKER_CONCURRENCY": str(concurrency)}
    if split is not None:
        env["WORKBENCH_SPLIT_QUERIES"] = split
    return SimpleNamespace(config=Config.from_env(env),
                           redis=FakeRedis(supervisors or [], leases, down))


def test_a_number_decides_by_the_query_count_alone() -> None:
    assert fanout.worth_splitting(svc("4"), 4, 0.0)
    assert not fanout.worth_splitting(svc("4"), 3, 100.0)
    assert not fanout.worth_splitting(svc("0"), 10_000, 100.0)


@pytest.mark.parametrize("raw", ["", "auto", "AUTO"])
def test_unset_or_auto_is_the_automatic_rule(raw: str) -> None:
    assert Config.from_env({"WORKBENCH_SPLIT_QUERIES": raw}).split_queries is None
    assert Config.from_env({}).split_queries is None


def test_a_bad_value_names_the_setting() -> None:
    with pytest.raises(ConfigError, match="WORKBENCH_SPLIT_QUERIES"):
        Config.from_env({"WORKBENCH_SPLIT_QUERIES": "-1"})


def test_a_job_that_cannot_gain_is_not_split() -> None:
    """150 pointwise queries x 2 configurations: a fraction of a second of work."""
    free = svc(None, ["q", "q"])
    assert not fanout.worth_splitting(free, 150, 150 * 2 * 0.0005)
    assert not fanout.worth_splitting(free, 99, 100.0)  # below the automatic floor
    assert fanout.worth_splitting(free, 1500, 1500 * 2 * 0.0005)


def test_a_long_job_is_split_only_when_another_slot_is_free() -> None:
    long = 10.0
    assert fanout.worth_splitting(svc(None, ["q"], leases=1, concurrency=2), 500, long)
    assert not fanout.worth_splitting(svc(None, ["q"], leases=2, concurrency=2), 500, long)
    assert not fanout.worth_splitting(svc(None, ["q"], leases=1, concurrency=1), 500, long)
    assert fanout.worth_splitting(svc(None, ["q", "q"], leases=1, concurrency=1), 500, long)


def test_free_slots_count_only_this_queue_and_at_least_this_job() -> None:
    assert fanout.free_slots(svc(None, ["q", "other"], leases=0, concurrency=2)) == 1
    assert fanout.free_slots(svc(None, [], leases=0, concurrency=3)) == 2  # unsupervised
    assert fanout.free_slots(svc(None, ["q"], leases=5, concurrency=2)) == -3


def test_redis_down_means_no_free_worker() -> None:
    assert fanout.free_slots(svc(None, ["q", "q"], down=True)) == 0
    assert not fanout.worth_splitting(svc(None, ["q", "q"], down=True), 500, 10.0)
