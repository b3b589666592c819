"""Every Redis key the workbench writes, named in one place.

Why at the root, beside ``config`` and ``errors``: the API processes, the workers and the CLI
all name the same keys, from several layers (``api`` writes idempotency fingerprints and cancel
flags, ``jobs`` leases and fan-out runs, ``llm`` rate limits, ``telemetry`` the stats counters),
and a key spelt twice is a key that can drift apart. This module imports nothing of the
workbench, so every layer may use it.

Two prefixes, for historical reasons: most keys start with ``workbench:``; the fan-out runs and
the shared LLM budget of a split judgment start with ``wb:``. The strings are kept exactly as
they are: a rolling upgrade must find the leases, queued markers and fan-out runs that workers
of the previous version wrote. Celery's own keys (its queue lists, ``unacked``, ``_kombu.*``)
are Celery's and not named here.

Every key, its type, TTL and owner (the module that writes it)::

    key                                        type    TTL                  owner
    workbench:queued:<task>:<entity>           string  none                 jobs.leases, jobs.queue
    workbench:queued-since                     zset    none                 jobs.leases, jobs.queue
    workbench:lease:<task>:<entity>            string  lease seconds        jobs.leases
    workbench:attempts:<task>:<entity>         int     7 days               jobs.sweeper
    workbench:cancel:<entity>                  string  24 h                 jobs.control
    workbench:supervisor:<host>:<pid>          string  30 s (3 heartbeats)  jobs.supervisor
    wb:fan:<run>:head                          string  24 h                 jobs.fanout
    wb:fan:<run>:{units,taken,done,tally}      hash    24 h                 jobs.fanout
    wb:fan:<run>:todo                          list    24 h                 jobs.fanout
    wb:fan:<run>:stop                          string  24 h                 jobs.fanout
    wb:budget:<judgment>:<digest>              hash    24 h                 judgments.llm.split/cost
    workbench:ratelimit:<model>:requests       string  next turn + 60 s     llm.rate_limit
    workbench:ratelimit:<model>:tokens         string  next turn + 60 s     llm.rate_limit
    workbench:ratelimit:<model>:pause          string  the pause + 1 s      llm.rate_limit
    workbench:format:<model>:<digest>          string  24 h                 llm.structured
    workbench:format:<model>:<digest>:probe    string  the LLM timeout      llm.structured
    workbench:stats:<stat>:total               int     none                 telemetry.event_stats
    workbench:stats:<stat>:last                string  none                 telemetry.event_stats
    workbench:stats:<stat>:bucket:<minute>     int     7 minutes            telemetry.event_stats
    workbench:idempotency:<kind>:<entity>      string  24 h                 api.creates
    workbench:schedule:<job>:last              string  none                 experiments.scheduling
    workbench:schedule:<job>:<enabled>:<fire>  string  7 days               experiments.scheduling
    workbench:cache:generation                 int     none                 store.generation
    workbench:remote:slots:<config>            zset    the lease + 10 s     remote.limits
    workbench:remote:cache:<config>:<digest>   string  cacheDurationMinutes remote.client

The TTLs are set by the owners (the numbers live there); this module only names the keys.
"""

from __future__ import annotations

# -- jobs: delivery, leases, cancel (jobs/leases.py, jobs/control.py) ----------------------------


def queued_key(task: str, entity_id: str) -> str:
    """The marker that a job's message is queued (written before it is sent)."""
    return f"workbench:queued:{task}:{entity_id}"


#: when each queued job was queued (member ``<task>:<entity>``, score: Unix time), for the queue
#: metrics (``telemetry.exporter``); a job leaves it when it takes its lease
QUEUED_SINCE_KEY = "workbench:queued-since"


def queued_member(task: str, entity_id: str) -> str:
    """A job's member in the ``QUEUED_SINCE_KEY`` set."""
    return f"{task}:{entity_id}"


def queued_key_of_member(member: str) -> str:
    """The queued marker of a ``queued_member`` (task names hold no colon)."""
    task, _, entity_id = member.partition(":")
    return queued_key(task, entity_id)


def lease_key(task: str, entity_id: str) -> str:
    """The lease of a running job: host, pid and a token of its holder."""
    return f"workbench:lease:{task}:{entity_id}"


def attempts_key(task: str, entity_id: str) -> str:
    """How many times the sweeper queued a lost job again."""
    return f"workbench:attempts:{task}:{entity_id}"


def cancel_key(entity_id: str) -> str:
    """Set by the API to ask the job of ``entity_id`` to stop."""
    return f"workbench:cancel:{entity_id}"


#: the records of the worker supervisors (``workbench status`` scans them)
SUPERVISOR_PREFIX = "workbench:supervisor:"


def supervisor_key(host: str, pid: int) -> str:
    return f"{SUPERVISOR_PREFIX}{host}:{pid}"


# -- fan-out runs and their shared budget (jobs/fanout.py, judgments/llm/split.py) ----------------

#: the keys of one fan-out run, by name (``fanout_key(run, name)``)
FANOUT_PARTS = ("head", "units", "todo", "taken", "done", "stop", "tally")


def fanout_key(run: str, name: str) -> str:
    """One key of a fan-out run; ``name`` is one of ``FANOUT_PARTS``."""
    return f"wb:fan:{run}:{name}"


def budget_key(judgment_id: str, digest: str) -> str:
    """The LLM budget every process of one split judgment run shares."""
    return f"wb:budget:{judgment_id}:{digest}"


# -- LLM rate limits (llm/rate_limit.py) ----------------------------------------------------------

RATE_LIMIT_PREFIX = "workbench:ratelimit:"


def rate_limit_keys(model_id: str) -> tuple[str, str, str]:
    """A model's request time, token time and pause-until, in the order its scripts take."""
    base = RATE_LIMIT_PREFIX + model_id
    return base + ":requests", base + ":tokens", base + ":pause"


# -- structured-output modes (llm/structured.py) ---------------------------------------------------


def format_key(model_id: str, digest: str) -> str:
    """The structured-output rung a model's server accepts (``digest`` names its endpoint)."""
    return f"workbench:format:{model_id}:{digest}"


def format_probe_key(model_id: str, digest: str) -> str:
    """Held by the one caller finding out a model's rung while nothing is remembered."""
    return format_key(model_id, digest) + ":probe"


# -- stats counters (telemetry/event_stats.py) ----------------------------------------------------

STATS_PREFIX = "workbench:stats"


def stat_key(name: str, part: str, prefix: str = STATS_PREFIX) -> str:
    """One key of an event counter: ``part`` is ``total``, ``last`` or ``bucket:<ms>``."""
    return f"{prefix}:{name}:{part}"


def stats_pattern(prefix: str = STATS_PREFIX) -> str:
    """Every counter key (to reset them)."""
    return f"{prefix}:*"


# -- creates and schedules (api/creates.py, experiments/scheduling.py) ----------------------------


def idempotency_key(kind: str, entity_id: str) -> str:
    """The fingerprint of the body first created under an idempotency key (``entity_id`` is
    derived from it)."""
    return f"workbench:idempotency:{kind}:{entity_id}"


def schedule_last_key(job_id: str) -> str:
    """The fire time a scheduler last handled for a scheduled experiment job."""
    return f"workbench:schedule:{job_id}:last"


def schedule_claim_key(job_id: str, enabled_time: object, fire_ms: int) -> str:
    """Claimed by the one scheduler that runs a job's fire time (of the job as enabled then)."""
    return f"workbench:schedule:{job_id}:{enabled_time}:{fire_ms}"


# -- the API processes' caches (store/generation.py) ---------------------------------------------

#: bumped by every change of the plugin settings, an A/B test or a search configuration: what an
#: API process keeps of them is good while it reads the same number
CACHE_GENERATION_KEY = "workbench:cache:generation"


# -- remote search configurations (remote/limits.py, remote/client.py) ---------------------------


def remote_slots_key(config_id: str) -> str:
    """The searches of a remote search configuration in flight (members: leases, scores: when
    each lease ends), shared by every process: its ``maxConcurrentRequests``."""
    return f"workbench:remote:slots:{config_id}"


def remote_cache_key(config_id: str, digest: str) -> str:
    """A remote search's mapped hits, ``digest`` the sha256 of its method, URL, body and
    response mapping."""
    return f"workbench:remote:cache:{config_id}:{digest}"


def remote_cache_pattern(config_id: str) -> str:
    """Every cached answer of one remote search configuration (dropped when it changes)."""
    return f"workbench:remote:cache:{config_id}:*"
