"""SRW event counters (docs/contract.md, "Stats"), kept in Redis so every API process and worker
shares them.

Each counter has a total, per-minute buckets for the trailing five full minutes, and the time of
its last event, as the plugin's ``TimestampedEventStat`` has.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import redis

from workbench.redis_keys import STATS_PREFIX, stat_key, stats_pattern

BUCKET_MS = 60_000
TRAILING_BUCKETS = 5

EVENT_STATS: dict[str, str] = {
    "import_judgment_rating_generations": "judgments",
    "llm_judgment_rating_generations": "judgments",
    "ubi_judgment_rating_generations": "judgments",
    "experiment_executions": "experiments",
    "experiment_pairwise_comparison_executions": "experiments",
    "experiment_pointwise_evaluation_executions": "experiments",
    "experiment_hybrid_optimizer_executions": "experiments",
}
INFO_STATS = ("cluster_version",)

# SET the key to ARGV[1] unless it already holds a later time.
_KEEP_LATEST = (
    "local v = redis.call('GET', KEYS[1]) "
    "if (not v) or tonumber(v) < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], ARGV[1]) end"
)


def full_path(name: str) -> str:
    """Where a stat sits in its section: ``judgments.llm_judgment_rating_generations`` for event
    counters (under ``all_nodes``/``nodes``), just ``cluster_version`` for info (under ``info``)."""
    return f"{EVENT_STATS[name]}.{name}" if name in EVENT_STATS else name


@dataclass(frozen=True)
class EventSnapshot:
    value: int
    trailing_interval_value: int
    minutes_since_last_event: int


class EventStats:
    """Counters under ``<prefix>:<stat>:...`` in Redis (``workbench.redis_keys.stat_key``)."""

    def __init__(self, client: redis.Redis, prefix: str = STATS_PREFIX) -> None:
        self.redis = client
        self.prefix = prefix

    def record(self, *names: str, now_ms: int | None = None) -> None:
        """Count one event of each of ``names``, in one round trip."""
        for name in names:
            if name not in EVENT_STATS:
                raise KeyError(name)
        now = now_ms if now_ms is not None else int(time.time() * 1000)
        bucket = now - now % BUCKET_MS
        pipe = self.redis.pipeline()
        for name in names:
            bucket_key = stat_key(name, f"bucket:{bucket}", self.prefix)
            pipe.incr(stat_key(name, "total", self.prefix))
            pipe.incr(bucket_key)
            pipe.pexpire(bucket_key, BUCKET_MS * (TRAILING_BUCKETS + 2))
            pipe.eval(_KEEP_LATEST, 1, stat_key(name, "last", self.prefix), now)
        pipe.execute()

    def snapshot(self, name: str, now_ms: int | None = None) -> EventSnapshot:
        now = now_ms if now_ms is not None else int(time.time() * 1000)
        current = now - now % BUCKET_MS
        cutoff = (now - TRAILING_BUCKETS * BUCKET_MS) // BUCKET_MS * BUCKET_MS
        buckets = list(range(cutoff, current, BUCKET_MS))
        values = self.redis.mget(
            [stat_key(name, "total", self.prefix), stat_key(name, "last", self.prefix),
             *(stat_key(name, f"bucket:{b}", self.prefix) for b in buckets)]
        )
        total, last = int(values[0] or 0), int(values[1] or 0)
        trailing = sum(int(v or 0) for v in values[2:])
        return EventSnapshot(total, trailing, now // BUCKET_MS - last // BUCKET_MS)

    def reset(self) -> None:
        """Forget every counter (the plugin does this when stats are switched off)."""
        keys = list(self.redis.scan_iter(stats_pattern(self.prefix), count=1000))
        if keys:
            self.redis.delete(*keys)
