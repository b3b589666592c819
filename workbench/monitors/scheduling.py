"""The monitors' scheduler loop: started by ``workbench scheduler`` next to the scheduled
experiments' loop (workbench/cli/main.py; experiments do not know monitors). Each fire time of a
monitor's cron is claimed in Redis with SET NX, as scheduled experiments' are, so any number of
schedulers start one run per fire time; a missed fire time (no scheduler running) is run once,
not once per missed time."""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime
from typing import Any

from workbench.monitors import run
from workbench.redis_keys import schedule_claim_key, schedule_last_key
from workbench.schemas.schedules import latest_fire
from workbench.services import Services
from workbench.store.indices import MONITOR_INDEX
from workbench.store.repository import Repository

log = logging.getLogger(__name__)

#: claims live a week: far longer than any gap between two ticks
CLAIM_SECONDS = 7 * 86400


def job_key(monitor_id: str) -> str:
    """The name a monitor's schedule has in the schedulers' Redis keys."""
    return f"monitor:{monitor_id}"


class MonitorScheduler:
    """Starts the runs of monitors whose cron fired; one per ``workbench scheduler``."""

    def __init__(self, svc: Services) -> None:
        self.svc = svc

    def tick(self, now: datetime | None = None) -> list[str]:
        """Start every run that is due; returns the run ids it created."""
        now = now or datetime.now(UTC)
        hits = Repository(self.svc.client, MONITOR_INDEX).search(
            {"query": {"exists": {"field": "schedule.cron"}}, "size": 10_000})["hits"]["hits"]
        started = []
        for hit in hits:
            try:
                run_id = self.fire_if_due(hit["_source"], now)
            except Exception:  # one bad monitor must not stop the others
                log.exception("monitor %s could not be fired", hit["_id"])
                continue
            if run_id:
                started.append(run_id)
        return started

    def fire_if_due(self, monitor: dict[str, Any], now: datetime) -> str | None:
        """Start a run of ``monitor`` (its stored document) when a fire time of its cron is
        due at ``now`` and no scheduler claimed it yet; the run's id, else None."""
        key = job_key(monitor["id"])
        last = self.svc.redis.get(schedule_last_key(key))
        after_ms = int(last) if last else int(monitor.get("enabledTime") or 0)
        fire = latest_fire(monitor["schedule"]["cron"], after_ms, now)
        if fire is None:
            return None
        fire_ms = int(fire.timestamp() * 1000)
        self.svc.redis.set(schedule_last_key(key), fire_ms)
        claim = schedule_claim_key(key, monitor.get("enabledTime"), fire_ms)
        if not self.svc.redis.set(claim, 1, nx=True, ex=CLAIM_SECONDS):
            return None  # another scheduler fired it
        run_id = run.start(self.svc, monitor, "schedule")
        log.info("scheduled run %s of monitor %s (fire time %s)", run_id, monitor["id"], fire)
        return run_id

    def run_forever(self, interval: float, stop: threading.Event | None = None) -> None:
        stop = stop or threading.Event()
        while not stop.is_set():
            try:
                self.tick()
            except Exception:
                log.exception("monitor scheduler tick failed")
            stop.wait(interval)

    def start(self, interval: float) -> threading.Thread:
        """``run_forever`` in a daemon thread."""
        thread = threading.Thread(target=self.run_forever, args=(interval,),
                                  name="monitor-scheduler", daemon=True)
        thread.start()
        return thread
