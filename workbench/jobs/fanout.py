"""One large job spread over every worker: a shared queue of units in Redis.

The job that owns the entity (the *parent*: it holds the entity's lease, reads and writes the
document) cuts its work into units, publishes them and queues one *helper* task. It then works
on units itself, so a job runs as before when no other worker is free, and waits for the units
others took. A helper takes units until none are left; when it takes its first unit while
more remain it queues one more helper, so the crew grows to the number of free workers and no
further (at most one helper message waits in the queue, and it ends at once if it comes late).

A unit is taken under a lease (``WORKBENCH_LEASE_SECONDS``, renewed by its holder): a unit whose
holder died (its lease lapsed) is taken again by the next taker, so a lost unit is done again,
not the whole job. A holder that is a dead process of this host is known dead at once: its
units are put back in line by the parent (``reclaim_dead``) without waiting for the lease.
Finishing a unit stores its result once (``HSETNX``): a unit done twice (its holder was slow,
not dead) keeps the first result, and units are idempotent (their writes use stable ids), so
the merge is the same either way.

The run's keys are named after a digest of the kind, the entity and the units: a parent that
runs again (its worker died and the sweeper queued it again) with the same work finds the units
already done and waits only for the rest; a parent that runs again with other units (its
inputs changed meanwhile) stops and forgets the earlier run first (``retire_others``), so no
two runs of one job go on at once and none is left behind. Every Redis call of a run waits out
a Redis that is away, in place (``Patience``): an outage costs the run its length, not a run
again. The parent deletes the keys once the run is merged,
cancelled or failed; a helper that comes later finds no run and stops. A helper whose view of
the job's inputs differs from the parent's declines (``Decline``). Keys (named by
``workbench.redis_keys.fanout_key``), all expiring ``KEY_TTL`` after they are made::

    wb:fan:<run>:head   JSON every unit of the run needs (the model, the prompt, ...)
    wb:fan:<run>:units  hash: unit number -> payload JSON
    wb:fan:<run>:todo   list of unit numbers not taken
    wb:fan:<run>:taken  hash: unit number -> "<holder> <lease deadline, ms of Redis's clock>"
    wb:fan:<run>:done   hash: unit number -> result JSON
    wb:fan:<run>:stop   set when the run is cancelled or failed: nothing more is taken
    wb:fan:<run>:tally  hash: the sums of the units' ``tally`` counts (LLM calls, tokens...)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import redis
from celery.exceptions import SoftTimeLimitExceeded

from workbench.jobs import handover
from workbench.jobs.base import Cancelled, HandedOver, JobFailed, failure_reason, is_transient
from workbench.jobs.control import JobControl
from workbench.jobs.leases import holder_is_dead, holder_value
from workbench.jobs.supervisor import read_all
from workbench.redis_keys import FANOUT_PARTS, fanout_key, lease_key
from workbench.services import Services
from workbench.store.identity import carry, current
from workbench.telemetry import instruments

log = logging.getLogger(__name__)

T = TypeVar("T")

HELPER_TASK = "workbench.jobs.help"
#: a unit result's key for counts summed over the run as units finish (read for progress)
TALLY = "tally"
KEY_TTL = 24 * 3600
#: how often the parent, with nothing to take, looks again (for the last results, lost units)
POLL = 0.02
#: how often the parent's waiting thread looks for units held by dead processes of this host
RECLAIM_EVERY = 1.0
#: what a split costs before any unit gains (publishing the units, a helper's Celery hop, the
#: helper loading the job's inputs, the parent waiting for the last unit and merging): about
#: 0.1-0.2 s on a 2-core machine (issue 22, 150 pointwise queries split: 0.226 s, unsplit 0.15 s)
SPLIT_COST_SECONDS = 0.25
#: a job is split only when its estimated serial work is this many times the cost of a split
SPLIT_MARGIN = 4.0
#: fewer queries than this are never split when the decision is automatic
AUTO_MIN_QUERIES = 100
#: longest pause between two tries of a Redis call while Redis is away (``Patience``)
PATIENCE_BACKOFF_MAX = 1.0

# Store the result of the unit just done, if any (once, and drop its lease); then take the next
# unit (or one whose holder's lease lapsed): false when stopped or nothing is left, -1 when the
# run is gone (finished and forgotten, or lost with Redis's data). One round trip per unit.
_TAKE = """
if redis.call('EXISTS', KEYS[3]) == 0 then return -1 end
local function expiring(key)  -- keys made after publishing expire with the run
  if redis.call('TTL', key) == -1 then redis.call('EXPIRE', key, ARGV[7]) end
end
if ARGV[3] ~= '' then
  if redis.call('HSETNX', KEYS[5], ARGV[3], ARGV[4]) == 1 and ARGV[6] ~= '' then
    for name, count in pairs(cjson.decode(ARGV[6])) do
      redis.call('HINCRBY', KEYS[6], name, count)
    end
    expiring(KEYS[6])
  end
  expiring(KEYS[5])
  redis.call('HDEL', KEYS[2], ARGV[3])
end
if ARGV[5] == '' or redis.call('EXISTS', KEYS[4]) == 1 then return false end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = redis.call('LPOP', KEYS[1])
while n and redis.call('HEXISTS', KEYS[5], n) == 1 do n = redis.call('LPOP', KEYS[1]) end
if not n then
  local held = redis.call('HGETALL', KEYS[2])
  for i = 1, #held, 2 do
    local deadline = tonumber(string.match(held[i + 1], ' (%d+)$'))
    if deadline < now and redis.call('HEXISTS', KEYS[5], held[i]) == 0 then
      n = held[i]
      break
    end
  end
end
if not n then return false end
redis.call('HSET', KEYS[2], n, ARGV[1] .. ' ' .. tostring(now + tonumber(ARGV[2])))
expiring(KEYS[2])
return {n, redis.call('HGET', KEYS[3], n)}
"""
# Push the leases of the units still held by ARGV[1] forward.
_RENEW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i = 3, #ARGV do
  local v = redis.call('HGET', KEYS[1], ARGV[i])
  if v and string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. ' ' then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[1] .. ' ' .. tostring(now + tonumber(ARGV[2])))
  end
end
return 0
"""
# Give a unit back (its holder stops without a result): first in line again.
_GIVE_BACK = """
local v = redis.call('HGET', KEYS[1], ARGV[1])
if v and string.sub(v, 1, #ARGV[2] + 1) == ARGV[2] .. ' ' then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('LPUSH', KEYS[2], ARGV[1])
  redis.call('EXPIRE', KEYS[2], ARGV[3])
end
return 0
"""


class UnitWorker(Protocol):
    """What one process does with the units of one run (built once per process and run)."""

    #: units this process works on at once (threads)
    threads: int

    def unit(self, payload: Any) -> Any:
        """Do one unit and return its JSON-able result; called from ``threads`` threads.
        Anything the unit writes must be written (and idempotent) before it returns. A dict
        result may carry ``TALLY``: integer counts summed across the run for progress (they
        are taken out of the stored result)."""

    def close(self) -> None:
        """After this process's last unit: flush what is buffered (best effort writes)."""


#: kind -> builds the unit worker from the services, the entity id and the run's head
KINDS: dict[str, Callable[[Services, str, Any], UnitWorker]] = {}
def unit_worker(svc: Services, kind_name: str, entity_id: str, head: Any) -> UnitWorker:
    """The unit worker of ``kind_name``, registered in ``KINDS`` by the domain module that
    splits such jobs (a worker imports every task module, and with them these)."""
    if kind_name not in KINDS:
        raise JobFailed(f"no unit worker is registered for split jobs of kind {kind_name!r}")
    return KINDS[kind_name](svc, entity_id, head)


class RunGone(redis.exceptions.ConnectionError):
    """The run's keys are gone from Redis: finished and forgotten (a late helper stops), or
    lost with a Redis that restarted without its data. Transient for the parent: its job is
    run again (``jobs.base``) and publishes the units anew."""


class Decline(Exception):
    """Raised by a unit worker factory when this process must not help with the run (what it
    loaded differs from what the parent works from): the helper ends without taking a unit."""


class UnitFailed(JobFailed):
    """A unit failed for good (not a passing outage); the whole run fails with its reason."""


class Patience:
    """Waits out a Redis that is away, in place, for every Redis call of one run in this
    process: a call that cannot reach Redis is tried again (0.05 s, doubling to
    ``PATIENCE_BACKOFF_MAX``) until it works or ``budget`` seconds have passed since the outage
    began. So a Redis restart costs a split job the outage and nothing more: a unit done while
    Redis was away keeps its result (stored once Redis is back), no lease lapses for want of a
    holder that gave up, and the job is not run again from the start (a run again would pay
    again for the units in flight). One WARNING line when an outage begins and one INFO line
    when Redis answers again, for the whole run in this process (its threads share this)."""

    def __init__(self, budget: float, what: str) -> None:
        self.budget = budget
        self.what = what
        self.lock = threading.Lock()
        self.since: float | None = None  # when the current outage began (monotonic)

    def call(self, action: Callable[[], T]) -> T:
        delay = 0.05
        while True:
            try:
                result = action()
            except RunGone:
                raise
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
                left = self._lost(exc)
                if left <= 0:
                    raise
                time.sleep(min(delay, left))
                delay = min(delay * 2, PATIENCE_BACKOFF_MAX)
                continue
            if self.since is not None:
                self._back()
            return result

    def _lost(self, exc: BaseException) -> float:
        """Seconds left of the budget for the outage ``exc`` belongs to."""
        with self.lock:
            now = time.monotonic()
            if self.since is None:
                self.since = now
                log.warning("%s: Redis is unreachable (%s); waiting for it here, at most %.0f s",
                            self.what, type(exc).__name__, self.budget)
            return self.budget - (now - self.since)

    def _back(self) -> None:
        with self.lock:
            if self.since is None:
                return
            log.info("%s: Redis answers again after %.1f s; carrying on", self.what,
                     time.monotonic() - self.since)
            self.since = None


@dataclass(frozen=True)
class Keys:
    run: str

    def key(self, name: str) -> str:
        return fanout_key(self.run, name)

    @property
    def head(self) -> str:
        return self.key("head")

    @property
    def units(self) -> str:
        return self.key("units")

    @property
    def todo(self) -> str:
        return self.key("todo")

    @property
    def taken(self) -> str:
        return self.key("taken")

    @property
    def done(self) -> str:
        return self.key("done")

    @property
    def stop(self) -> str:
        return self.key("stop")

    @property
    def tally(self) -> str:
        return self.key("tally")

    def all(self) -> list[str]:
        return [self.key(name) for name in FANOUT_PARTS]


def _text(value: bytes | str | int) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def run_name(kind_name: str, entity_id: str, head: Any, payloads: Sequence[Any]) -> str:
    digest = hashlib.sha256(json.dumps([kind_name, entity_id, head, list(payloads)],
                                       sort_keys=True, default=str).encode()).hexdigest()
    return f"{kind_name}:{entity_id}:{digest[:20]}"


class Crew:
    """Takes and does units of one run in this process: ``threads`` threads, each taking one
    unit at a time, and one heartbeat renewing the leases of the units held."""

    def __init__(self, r: redis.Redis, keys: Keys, worker: UnitWorker, lease_seconds: float,
                 waits: bool, patience: Patience | None = None) -> None:
        """``waits``: the parent's crew keeps looking for units until every unit is done (it
        takes over those whose holder died); a helper's crew ends when nothing is left.
        ``patience``: how its Redis calls wait out an outage (none: not at all)."""
        self.redis = r
        self.patience = patience or Patience(0.0, keys.run)
        self.keys = keys
        self.worker = worker
        self.lease_ms = max(1000, int(lease_seconds * 1000))
        self.waits = waits
        self.holder = holder_value()
        self.held: set[str] = set()
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.total = 0
        self.finished = 0  # units this process finished
        self.taken_any = threading.Event()
        self.errors: list[BaseException] = []
        self._take = r.register_script(_TAKE)

    def take(self, finished: tuple[str, Any] | None = None, more: bool = True,
             ) -> tuple[str, Any] | None:
        """Store ``finished`` (unit number, result) if given; then, with ``more``, take the
        next unit (None: stopped, or nothing to take now)."""
        number, result = finished if finished is not None else ("", None)
        tally = result.pop(TALLY, None) if isinstance(result, dict) else None
        args: list[str | int] = [
            self.holder, self.lease_ms, number, json.dumps(result, separators=(",", ":")),
            "1" if more else "", json.dumps(tally) if tally else "", KEY_TTL]
        # Tried again until Redis answers: storing a result twice keeps the first (HSETNX). A
        # unit taken by a call whose answer was lost stays held by no thread; its lease lapses
        # and it is taken again, never done twice at once.
        found = self.patience.call(lambda: self._take(
            keys=[self.keys.todo, self.keys.taken, self.keys.units, self.keys.stop,
                  self.keys.done, self.keys.tally], args=args))
        if found == -1:
            raise RunGone(f"the units of {self.keys.run} are no longer in Redis")
        with self.lock:
            if finished is not None:
                self.held.discard(number)
                self.finished += 1
            if found:
                self.held.add(_text(found[0]))
        return (_text(found[0]), json.loads(found[1])) if found else None

    def give_back(self, number: str) -> None:
        with contextlib.suppress(redis.exceptions.RedisError):  # else its lease lapses
            self.patience.call(lambda: self.redis.eval(
                _GIVE_BACK, 2, self.keys.taken, self.keys.todo, number, self.holder, KEY_TTL))
        with self.lock:
            self.held.discard(number)

    def stop(self) -> None:
        """Nothing more is taken by anyone (a cancel, or a unit that failed for good)."""
        self.stopping.set()
        self.patience.call(lambda: self.redis.set(self.keys.stop, "1", ex=KEY_TTL))

    def reclaim_dead(self) -> int:
        return self.patience.call(lambda: reclaim_dead(self.redis, self.keys))

    def complete(self) -> bool:
        return self.patience.call(lambda: int(self.redis.hlen(self.keys.done))) >= self.total

    def stopped(self) -> bool:
        """The run's stop flag is set (cancelled, or a unit failed for good)."""
        return bool(self.patience.call(lambda: self.redis.exists(self.keys.stop)))

    def _beat(self) -> None:
        while not self.stopping.wait(self.lease_ms / 3000):
            with self.lock:
                held = sorted(self.held)
            if not held:
                continue
            try:
                self.redis.eval(_RENEW, 1, self.keys.taken, self.holder, self.lease_ms, *held)
            except redis.exceptions.RedisError as exc:
                log.warning("could not renew the leases of %d unit(s): %s", len(held),
                            type(exc).__name__)

    def _loop(self, on_first: Callable[[], None] | None, waiter: bool) -> None:
        """One thread: take and do units. With nothing left to take, only the parent's
        ``waiter`` thread stays, looking every ``POLL`` for units whose holder died, until
        every unit is done."""
        finished: tuple[str, Any] | None = None
        reclaimed_at = time.monotonic()
        while True:
            # a helper of a stopping worker takes no more units (the parent stops the run)
            leaving = not self.waits and handover.requested()
            found = self.take(finished, more=not self.stopping.is_set() and not leaving)
            finished = None
            if found is None:
                if self.stopping.is_set() or leaving or not (self.waits and waiter):
                    return
                if self.stopped() or self.complete():
                    return
                if time.monotonic() - reclaimed_at >= RECLAIM_EVERY:
                    reclaimed_at = time.monotonic()
                    if self.reclaim_dead():
                        continue
                time.sleep(POLL)
                continue
            if on_first is not None and not self.taken_any.is_set():
                self.taken_any.set()
                on_first()
            number, payload = found
            try:
                result = self.worker.unit(payload)
            except BaseException as exc:
                if is_transient(exc) or not isinstance(exc, Exception):
                    self.give_back(number)  # done again, here or elsewhere
                else:  # fails the run: the parent reads the reason from the unit's result
                    self.take((number, unit_failed(exc)), more=False)
                    self.stop()
                raise
            finished = (number, result)

    def work(self, on_first: Callable[[], None] | None = None) -> None:
        """Take and do units until none are left (or, waiting, all are done); the first
        failure is raised after the other threads stopped taking units."""
        beat = threading.Thread(target=self._beat, name="fanout-lease", daemon=True)
        beat.start()
        threads = []

        def loop(waiter: bool) -> None:
            try:
                self._loop(on_first, waiter)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller below
                self.errors.append(exc)
                self.stopping.set()

        try:
            for number in range(max(1, self.worker.threads)):
                thread = threading.Thread(target=carry(loop), args=(number == 0,),
                                          name=f"fanout-{number}", daemon=True)
                thread.start()
                threads.append(thread)
            for thread in threads:
                thread.join()
        finally:
            self.stopping.set()
            beat.join(5)
        if self.errors:
            raise self.errors[0]


def reclaim_dead(r: redis.Redis, keys: Keys) -> int:
    """Put back in line the units held by dead processes of this host (a killed worker's), as
    if they had been given back; returns how many. Holders elsewhere are left to their lease."""
    count = 0
    for number, value in r.hgetall(keys.taken).items():
        holder = _text(value).rsplit(" ", 1)[0]
        if holder_is_dead(holder):
            r.eval(_GIVE_BACK, 2, keys.taken, keys.todo, _text(number), holder, KEY_TTL)
            count += 1
    if count:
        instruments.LEASE_RECOVERIES.labels("split_unit").inc(count)
        log.info("run %s: %d unit(s) of dead processes of this host put back in line",
                 keys.run, count)
    return count


def results(r: redis.Redis, keys: Keys, total: int) -> list[Any]:
    """Every unit's result in unit order; None for a unit not done (the run was stopped)."""
    stored = {_text(k): v for k, v in r.hgetall(keys.done).items()}
    raw = [stored.get(str(n)) for n in range(total)]
    return [json.loads(v) if v is not None else None for v in raw]


def publish(r: redis.Redis, keys: Keys, head: Any, payloads: Sequence[Any]) -> int:
    """Make the units takeable; returns how many were already done (an earlier run's)."""
    r.delete(keys.stop)
    if not r.exists(keys.units):
        pipe = r.pipeline(transaction=True)
        pipe.set(keys.head, json.dumps(head))
        for start in range(0, len(payloads), 1000):
            part = payloads[start:start + 1000]
            pipe.hset(keys.units, mapping={str(start + i): json.dumps(p)
                                           for i, p in enumerate(part)})
            pipe.rpush(keys.todo, *[str(start + i) for i in range(len(part))])
        for key in keys.all():
            pipe.expire(key, KEY_TTL)
        pipe.execute()
        return 0
    # Run again: every unit neither done, held nor waiting is put back in line.
    reclaim_dead(r, keys)
    done = {_text(k) for k in r.hkeys(keys.done)}
    held = {_text(k) for k in r.hkeys(keys.taken)}
    waiting = {_text(k) for k in r.lrange(keys.todo, 0, -1)}
    missing = [str(n) for n in range(len(payloads))
               if str(n) not in done | held | waiting]
    if missing:
        r.rpush(keys.todo, *missing)
    for key in keys.all():
        r.expire(key, KEY_TTL)
    log.info("run %s resumed: %d of %d units already done", keys.run, len(done), len(payloads))
    return len(done)


def worth_splitting(svc: Services, queries: int, seconds: float) -> bool:
    """Whether a job over ``queries`` queries, estimated to take ``seconds`` on one worker
    process, is split. ``WORKBENCH_SPLIT_QUERIES`` set to a number decides by the query count
    alone (0 never; tests force splits so). Unset, a job is split only when it has
    ``AUTO_MIN_QUERIES`` queries, its work exceeds ``SPLIT_MARGIN`` times what splitting costs
    (``SPLIT_COST_SECONDS``), and another worker is free to take units: a job that cannot gain
    pays none of it (checked in that order, the cheap tests first)."""
    threshold = svc.config.split_queries
    if threshold is not None:
        return threshold > 0 and queries >= threshold
    if queries < AUTO_MIN_QUERIES or seconds < SPLIT_MARGIN * SPLIT_COST_SECONDS:
        return False
    free = free_slots(svc)
    if free < 1:
        log.info("a job of %d queries (about %.1f s) is not split: no other worker is free",
                 queries, seconds)
    return free >= 1


def free_slots(svc: Services) -> int:
    """Job slots of this queue's workers that run no job, as Redis knows them: every live
    worker supervisor of the queue (``jobs.supervisor``'s records) brings this worker's
    concurrency (workers are assumed alike), every live job lease (``jobs.leases``, this job's
    too) takes one. An unsupervised worker leaves no record: with none, this worker alone
    counts. Redis down: none free (the job runs here, unsplit)."""
    try:
        workers = sum(1 for record in read_all(svc.redis)
                      if record.get("queue") == svc.config.task_queue)
        busy = sum(1 for _ in svc.redis.scan_iter(lease_key("*", "*"), count=500))
    except redis.exceptions.RedisError as exc:
        log.warning("cannot count the free workers (Redis: %s): the job is not split",
                    type(exc).__name__)
        return 0
    return max(1, workers) * svc.config.worker_concurrency - max(1, busy)


def queue_helper(kind_name: str, entity_id: str, run: str) -> None:
    """Queue one helper of ``run``, acting as the identity this job acts as."""
    from workbench.jobs.celery_app import celery_app

    identity = current()
    user = identity.impersonate if identity is not None else None
    celery_app.send_task(HELPER_TASK, args=[kind_name, entity_id, run, user])


def with_tally(exc: BaseException, run_tally: dict[str, int]) -> BaseException:
    """``exc`` carrying the run's tally as ``run_tally``: what the units done anywhere spent,
    for a caller that keeps a failed run's usage (``judgments.llm.split``)."""
    exc.run_tally = run_tally  # type: ignore[attr-defined]
    return exc


def tally(r: redis.Redis, keys: Keys) -> dict[str, int]:
    """The run's tally so far (every unit done anywhere)."""
    return {_text(k): int(v) for k, v in r.hgetall(keys.tally).items()}


def spread(svc: Services, kind_name: str, entity_id: str, head: Any, payloads: Sequence[Any],
           weights: Sequence[int], control: JobControl | None,
           progress_tally: bool = False, own: UnitWorker | None = None,
           retired: Callable[[dict[str, int]], None] | None = None) -> list[Any]:
    """Run every unit (here and on any free worker) and return their results in order.

    ``weights`` are the progress units (queries, pairs) of each unit; ``control`` gets progress
    (with ``progress_tally``, its ``usage`` is the run's tally) and its cancel stops every
    participant from taking more units: the units in flight, here and on other workers,
    finish, then ``Cancelled`` is raised. ``own`` is this process's unit worker when the caller
    has one ready (built from what it already loaded); else it is built like a helper's.
    ``retired`` is given the tally of an earlier run of this entity with other units (its
    job ran again on inputs that changed meanwhile), which this run stops and forgets: what it
    spent is the caller's to count. Redis being away is waited out in place (``Patience``,
    up to ``WORKBENCH_OUTAGE_BUDGET``)."""
    keys = Keys(run_name(kind_name, entity_id, head, payloads))
    r = svc.redis
    patience = Patience(svc.config.outage_budget, f"{kind_name} {entity_id}")
    started = time.monotonic()
    old = patience.call(lambda: retire_others(r, keys, svc.config.lease_seconds))
    if old and retired is not None:
        retired(old)
    already = patience.call(lambda: publish(r, keys, head, payloads))
    log.info("%s %s split into %d units (%d done before)", kind_name, entity_id, len(payloads),
             already)
    worker = own or unit_worker(svc, kind_name, entity_id, head)
    crew = Crew(r, keys, worker, svc.config.lease_seconds, waits=True, patience=patience)
    crew.total = len(payloads)
    if control is not None and progress_tally:
        control.usage = _last_known(lambda: tally(r, keys))
    if already < len(payloads):
        try:
            queue_helper(kind_name, entity_id, keys.run)
        except Exception as exc:  # noqa: BLE001 - the parent does every unit itself then
            log.warning("%s %s: no helper could be queued (%s); this worker does the units",
                        kind_name, entity_id, failure_reason(exc))
    runner = threading.Thread(target=carry(_work_closing), args=(crew, worker),
                              name="fanout-parent", daemon=True)
    runner.start()
    try:
        _watch(crew, runner, keys, weights, control)
    except BaseException as exc:
        if not isinstance(exc, Cancelled):  # a cancel (a time limit too) stopped the run itself
            _abandon(crew, runner, keys, exc)
        raise
    finally:
        runner.join()
    first = crew.errors[0] if crew.errors else None
    if first is not None and (is_transient(first) or not isinstance(first, Exception)):
        raise first  # waited out by the job: the run's keys stay for its next attempt
    out = patience.call(lambda: results(r, keys, len(payloads)))
    done_tally = patience.call(lambda: tally(r, keys))
    # merged or failed: a helper that comes late finds nothing
    patience.call(lambda: r.delete(*keys.all()))
    failed = next((o for o in out if isinstance(o, dict) and "unitError" in o), None)
    if failed is not None:  # a unit failed for good, here or on another worker
        raise with_tally(UnitFailed(failed["unitError"]), done_tally)
    if first is not None:
        raise with_tally(first, done_tally)
    log.info("%s %s: %d units done in %.2f s", kind_name, entity_id, len(payloads),
             time.monotonic() - started)
    if any(o is None for o in out):
        raise JobFailed(f"{out.count(None)} of {len(out)} units of the job were not done")
    return out


def _abandon(crew: Crew, runner: threading.Thread, keys: Keys, exc: BaseException) -> None:
    """The parent was interrupted while it watched (Celery's soft time limit, say): every
    participant stops taking units, the units in flight finish, ``exc`` carries what the run
    spent, and the run is forgotten unless the job will run again (a passing outage)."""
    crew.stopping.set()
    with contextlib.suppress(redis.exceptions.RedisError):
        crew.redis.set(keys.stop, "1", ex=KEY_TTL)
    runner.join()
    with contextlib.suppress(redis.exceptions.RedisError):
        with_tally(exc, tally(crew.redis, keys))
        if not is_transient(exc):
            crew.redis.delete(*keys.all())


def _last_known(read: Callable[[], dict[str, int]]) -> Callable[[], dict[str, int]]:
    """``read``, answering what it last read while Redis is away (progress is informative:
    it must not wait, nor fail the job)."""
    last: dict[str, int] = {}

    def reading() -> dict[str, int]:
        nonlocal last
        with contextlib.suppress(redis.exceptions.RedisError):
            last = read()
        return last

    return reading


#: what every fan-out key starts with: ``wb:fan:``
_PREFIX = fanout_key("", "")[:-1]


def runs_of(r: redis.Redis, kind_name: str, entity_id: str) -> set[str]:
    """The names of every run of this entity's job of ``kind_name`` that Redis holds."""
    found = set()
    for key in r.scan_iter(f"{_PREFIX}{kind_name}:{entity_id}:*", count=500):
        run_and_part = _text(key)[len(_PREFIX):]
        found.add(run_and_part.rsplit(":", 1)[0])
    return found


def retire_others(r: redis.Redis, keys: Keys, lease_seconds: float) -> dict[str, int]:
    """Stop and forget every other run of the entity ``keys`` names (an earlier run of the
    same job whose units differ: the job ran again after its inputs changed, say ratings
    cached meanwhile), so its helpers stop taking units and no key of it is left behind.
    Units in flight finish first (at most one lease period); returns the sum of the retired
    runs' tallies (what their units spent)."""
    kind_name, entity_id, _ = keys.run.split(":", 2)
    total: dict[str, int] = {}
    for run in runs_of(r, kind_name, entity_id) - {keys.run}:
        old = Keys(run)
        r.set(old.stop, "1", ex=KEY_TTL)
        reclaim_dead(r, old)
        deadline = time.monotonic() + lease_seconds
        while r.hlen(old.taken) and time.monotonic() < deadline:
            time.sleep(POLL)
        spent = tally(r, old)
        for name, count in spent.items():
            total[name] = total.get(name, 0) + count
        r.delete(*old.all())
        log.info("run %s stopped and forgotten: run %s replaces it (its units spent %s)", run,
                 keys.run, spent or "nothing")
    return total


def _work_closing(crew: Crew, worker: UnitWorker) -> None:
    try:
        crew.work()
    except BaseException as exc:  # noqa: BLE001 - read by the parent through crew.errors
        if exc not in crew.errors:
            crew.errors.append(exc)
    finally:
        try:
            worker.close()
        except Exception as exc:  # noqa: BLE001 - as above
            crew.errors.append(exc)


def _watch(crew: Crew, runner: threading.Thread, keys: Keys, weights: Sequence[int],
           control: JobControl | None) -> None:
    """The parent's main thread: progress from the units done, and the cancel flag."""
    total_weight = sum(weights)
    if control is not None:
        control.start(total_weight, control.phase)
    while runner.is_alive():
        runner.join(0.25)
        if control is not None:
            stopping = control.handing_over() or control.cancelled()
        else:
            stopping = handover.requested()
        if stopping:
            crew.stop()
            runner.join()
            _drain(crew, keys)
            # its progress reads the tally: before the keys go
            cancelled = control.error() if control is not None else HandedOver()
            with_tally(cancelled, crew.patience.call(lambda: tally(crew.redis, keys)))
            crew.patience.call(lambda: crew.redis.delete(*keys.all()))
            raise cancelled
        if control is None:
            continue
        done = [int(k) for k in crew.patience.call(lambda: crew.redis.hkeys(keys.done))] \
            if control.due() else None
        if done is not None:
            control.reach(sum(weights[n] for n in done if n < len(weights)))
    if control is not None and not crew.errors:
        control.reach(total_weight)


def _drain(crew: Crew, keys: Keys) -> None:
    """After a stop: wait until no unit is held by a live holder (units in flight on other
    workers finish and write what they write), at most one lease period."""
    deadline = time.monotonic() + crew.lease_ms / 1000
    while crew.patience.call(lambda: crew.redis.hlen(keys.taken)) \
            and time.monotonic() < deadline:
        time.sleep(POLL)


def unit_failed(exc: BaseException) -> dict[str, str]:
    """The result a unit stores when it failed for good: the parent fails the run with it."""
    return {"unitError": failure_reason(exc)}


#: how long a helper interrupted by its time limit waits for its units in flight to be stored
HELPER_SETTLE_SECONDS = 10.0


def _let_units_in_flight_finish(crew: Crew) -> None:
    """After ``Crew.work`` was interrupted (it stopped taking units): wait, at most
    ``HELPER_SETTLE_SECONDS``, until the units this process holds are stored or given back, so
    that closing the unit worker does not cut them off."""
    deadline = time.monotonic() + HELPER_SETTLE_SECONDS
    while time.monotonic() < deadline:
        with crew.lock:
            if not crew.held:
                return
        time.sleep(POLL)


def help_run(svc: Services, kind_name: str, entity_id: str, run: str) -> int:
    """A helper task: take and do units of ``run`` until none are left; returns how many this
    process did. The first unit taken queues one more helper when units remain."""
    keys = Keys(run)
    r = svc.redis
    patience = Patience(svc.config.outage_budget, f"helper of {kind_name} {entity_id}")
    raw = patience.call(lambda: r.get(keys.head))
    if raw is None or patience.call(lambda: r.exists(keys.stop) or not r.llen(keys.todo)):
        return 0
    try:
        worker = unit_worker(svc, kind_name, entity_id, json.loads(raw))
    except Decline as exc:
        log.warning("%s %s: this worker does not help: %s", kind_name, entity_id, exc)
        return 0
    crew = Crew(r, keys, worker, svc.config.lease_seconds, waits=False, patience=patience)

    def more() -> None:
        try:
            if r.llen(keys.todo):
                queue_helper(kind_name, entity_id, run)
        except Exception as exc:  # noqa: BLE001 - a helper more is a gain, not a need
            log.info("%s %s: no further helper queued (%s)", kind_name, entity_id,
                     type(exc).__name__)

    try:
        crew.work(on_first=more)
    except RunGone:
        log.info("%s %s: the run ended while this helper worked", kind_name, entity_id)
    except SoftTimeLimitExceeded:  # an ending, not a crash: one line, no traceback
        _let_units_in_flight_finish(crew)
        log.warning("%s %s: this helper ran past its time limit (WORKBENCH_JOB_TIMEOUT=%d s, "
                    "interrupted after %d s) and takes no more units", kind_name, entity_id,
                    svc.config.job_timeout, svc.config.job_interrupt_after)
    except JobFailed as exc:  # a cancel, a failure the job names: one line, no traceback
        log.log(exc.log_level, "unit of %s %s ended: %s", kind_name, entity_id,
                failure_reason(exc))
    except Exception as exc:
        if is_transient(exc):
            raise  # waited out by the task, which runs this helper again
        log.exception("unit of %s %s failed: %s", kind_name, entity_id, failure_reason(exc))
    finally:
        worker.close()
    return crew.finished
