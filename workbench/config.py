"""Every workbench setting in one place: its default, its environment variable, its meaning.

The fields of ``Config`` are the single source: ``Config.from_env`` reads them, ``settings_table``
renders the configuration table of docs/configuration.md, and the docker-compose test checks
against them.
"""

from __future__ import annotations

import base64
import json
import os
import re
from dataclasses import Field, dataclass, field, fields, replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

REPO_ROOT = Path(__file__).resolve().parent.parent


class ConfigError(ValueError):
    """A setting has a value the workbench cannot use."""


#: a job is stopped this many seconds before WORKBENCH_JOB_TIMEOUT, to end it cleanly
JOB_STOP_MARGIN = 30
#: Celery's soft time limit interrupts a job that did not stop this long before the timeout
JOB_INTERRUPT_MARGIN = 15
#: the smallest WORKBENCH_JOB_TIMEOUT: a job gets at least JOB_STOP_MARGIN seconds of work
JOB_TIMEOUT_MIN = 60


def _bool(raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"expected true or false, got {raw!r}")


def _positive_int(raw: str) -> int:
    value = int(raw)
    if value <= 0:
        raise ValueError(f"expected a positive integer, got {raw!r}")
    return value


def _non_negative_int(raw: str) -> int:
    value = int(raw)
    if value < 0:
        raise ValueError(f"expected 0 or a positive integer, got {raw!r}")
    return value


def _split_queries(raw: str) -> int | None:
    """``auto`` (or empty): decided per job; else a query count (0 never splits)."""
    if raw.strip().lower() in ("", "auto"):
        return None
    return _non_negative_int(raw)


#: what ``WORKBENCH_WORKER_STOP`` may be
WORKER_STOP_MODES = ("handover", "finish")


def _worker_stop(raw: str) -> str:
    value = raw.strip().lower()
    if value not in WORKER_STOP_MODES:
        raise ValueError(f"expected handover or finish, got {raw!r}")
    return value


def _positive_float(raw: str) -> float:
    value = float(raw)
    if value <= 0:
        raise ValueError(f"expected a positive number, got {raw!r}")
    return value


def _port(raw: str) -> int:
    value = int(raw)
    if not 0 < value < 65536:
        raise ValueError(f"expected a TCP port, got {raw!r}")
    return value


def _optional_port(raw: str) -> int | None:
    return _port(raw) if raw.strip() else None


def _url(raw: str) -> str:
    parts = urlsplit(raw.strip())
    if not parts.scheme or not parts.netloc:
        raise ValueError(f"expected a URL such as http://localhost:9200, got {raw!r}")
    return raw.strip().rstrip("/")


def _separator(entry: str) -> str | None:
    """How an entry of ``OPENSEARCH_URL`` that holds several nodes separates them, if it does:
    ``semicolons`` or ``spaces`` (never part of a URL's host and port; a password may hold a
    semicolon, so only one after the credentials, or before a second ``scheme://``, counts)."""
    netloc = urlsplit(entry).netloc.rsplit("@", 1)[-1]
    if ";" in netloc or re.search(r";\s*[A-Za-z][A-Za-z0-9+.-]*://", entry):
        return "semicolons"
    return "spaces" if re.search(r"\s", entry) else None


def _node_urls(raw: str) -> str:
    """One node's URL, or the nodes of one cluster separated by commas, as every OpenSearch client
    takes them: each http or https with a host (and a numeric port), all alike in scheme, path and
    credentials, none twice. A bad entry is named (without its credentials)."""
    entries = [entry.strip() for entry in raw.split(",")]
    several = len(entries) > 1
    first: tuple[str, str, str | None, str | None] | None = None
    seen: set[tuple[str, int | None]] = set()
    for number, entry in enumerate(entries, 1):
        label = f"entry {number} ({redact_url(entry)!r})" if several else repr(redact_url(entry))
        if not entry:
            raise ValueError(f"entry {number} is empty: separate node URLs with single commas"
                             if several else "expected a URL such as http://localhost:9200")
        separator = _separator(entry)
        if separator:
            shown = re.sub(r"//[^/@]*@", "//", entry)  # every URL's credentials
            shown = f"entry {number} ({shown!r})" if several else repr(shown)
            raise ValueError(f"{shown} is not one node URL: separate the nodes with commas, "
                             f"not {separator}")
        parts = urlsplit(entry)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{label} is not a node URL such as http://localhost:9200")
        try:
            port = parts.port
        except ValueError:
            raise ValueError(f"{label} has a port that is not a number from 0 to 65535") \
                from None
        if parts.query or parts.fragment:
            raise ValueError(f"{label} has a query or fragment; a node URL has neither")
        shape = (parts.scheme, parts.path.rstrip("/"), parts.username, parts.password)
        if first is None:
            first = shape
        elif shape[0] != first[0]:
            raise ValueError(f"{label} uses {shape[0]} where entry 1 uses {first[0]}: the "
                             "nodes of one cluster share a scheme")
        elif shape[1] != first[1]:
            raise ValueError(f"{label} has the path {shape[1] or '/'!r} where entry 1 has "
                             f"{first[1] or '/'!r}: the nodes share one path")
        elif shape[2:] != first[2:]:
            raise ValueError(f"{label} has other credentials than entry 1: give one set, in "
                             "every entry alike or in OPENSEARCH_USERNAME/OPENSEARCH_PASSWORD")
        node = (parts.hostname.lower(), port)
        if node in seen:
            raise ValueError(f"{label} names a node already listed")
        seen.add(node)
    return ",".join(entry.rstrip("/") for entry in entries)


#: the scheme of a Redis Sentinel entry, in the form kombu documents for its broker URL
SENTINEL_SCHEME = "sentinel"


@dataclass(frozen=True)
class Sentinels:
    """A ``sentinel://`` list read: the sentinels' addresses, and the database and credentials
    of the master they watch, which kombu reads from the first entry."""

    nodes: tuple[tuple[str, int], ...]
    db: int
    username: str | None
    password: str | None


def is_sentinel_url(url: str | None) -> bool:
    return bool(url) and urlsplit(str(url).strip().split(";", 1)[0]).scheme == SENTINEL_SCHEME


def sentinels(raw: str) -> Sentinels:
    """Read ``sentinel://[[user]:password@]host:port[/db];sentinel://host2:port;...``, the form of
    kombu's Sentinel broker URL: one entry per sentinel, separated by semicolons, each with its
    port; the master's credentials and database in the first entry (later entries may repeat
    them, not give others). A bad entry is named (without its credentials)."""
    entries = [entry.strip() for entry in raw.strip().split(";")]
    several = len(entries) > 1
    nodes: list[tuple[str, int]] = []
    first: tuple[int, str | None, str | None] | None = None
    for number, entry in enumerate(entries, 1):
        label = f"entry {number} ({redact_url(entry)!r})" if several else repr(redact_url(entry))
        if not entry:
            raise ValueError(f"entry {number} is empty: separate sentinels with single "
                             "semicolons, as in sentinel://h1:26379;sentinel://h2:26379")
        parts = urlsplit(entry)
        if parts.scheme != SENTINEL_SCHEME:
            raise ValueError(f"{label} is not a sentinel URL such as sentinel://host:26379: "
                             "every entry of a list of sentinels starts with sentinel://")
        if not parts.hostname:
            raise ValueError(f"{label} has no host")
        try:
            port = parts.port
        except ValueError:
            raise ValueError(f"{label} has a port that is not a number from 0 to 65535") \
                from None
        if port is None:
            raise ValueError(f"{label} has no port: give each sentinel's port (sentinels "
                             "usually listen on 26379)")
        if parts.query or parts.fragment:
            raise ValueError(f"{label} has a query or fragment; a sentinel entry has neither")
        path = parts.path.strip("/")
        if path and not path.isdigit():
            raise ValueError(f"{label} names the database {path!r}; a database is a number, "
                             "as in sentinel://host:26379/0")
        shape = (int(path) if path else (first[0] if first else 0),
                 unquote(parts.username) if parts.username else None,
                 unquote(parts.password) if parts.password is not None else None)
        if first is None:
            first = shape
        elif (path and shape[0] != first[0]) or ((parts.username or parts.password is not None)
                                                 and shape[1:] != first[1:]):
            raise ValueError(f"{label} gives another database or other credentials than entry "
                             "1: the master's database and credentials are read from entry 1")
        node = (parts.hostname.lower(), port)
        if node in nodes:
            raise ValueError(f"{label} names a sentinel already listed")
        nodes.append(node)
    assert first is not None
    return Sentinels(tuple(nodes), *first)


def _redis_url(raw: str) -> str:
    """A Redis URL (redis://, rediss://, unix://), or a list of Redis Sentinels (``sentinels``)."""
    if is_sentinel_url(raw):
        sentinels(raw)
        return raw.strip()
    return _url(raw)


def _optional_broker_url(raw: str) -> str | None:
    """Any broker URL Celery reads; a list of sentinels is checked as for REDIS_URL."""
    if is_sentinel_url(raw):
        return _redis_url(raw)
    return raw or None


def _str(raw: str) -> str:
    return raw


def _optional_str(raw: str) -> str | None:
    return raw or None


def _fernet_keys(raw: str) -> str | None:
    """Comma-separated Fernet keys (url-safe base64 of 32 bytes), checked without using them."""
    keys = [k.strip() for k in raw.split(",") if k.strip()]
    for position, key in enumerate(keys):
        try:
            ok = len(base64.urlsafe_b64decode(key.encode())) == 32
        except (ValueError, TypeError):
            ok = False
        if not ok:
            raise ValueError(f"key {position + 1} is not a Fernet key (url-safe base64 of 32 "
                             "bytes; generate one with `python -c \"from cryptography.fernet "
                             "import Fernet; print(Fernet.generate_key().decode())\"`)")
    return ",".join(keys) or None


def _regex_list(raw: str) -> tuple[str, ...]:
    """A JSON array of regular expressions, each of which must compile."""
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"expected a JSON array of regular expressions ({exc.msg})") from None
    if not isinstance(data, list) or not all(isinstance(p, str) for p in data):
        raise ValueError("expected a JSON array of regular expressions (strings)")
    for position, pattern in enumerate(data):
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"pattern {position + 1} is not a regular expression: {exc}") \
                from None
    return tuple(data)


def setting(default: Any, env: str, parse: Any, help: str, secret: bool = False) -> Any:
    """Declare a Config field together with its environment variable, parser and meaning."""
    return field(
        default=default,
        repr=not secret,
        metadata={"env": env, "parse": parse, "help": help, "secret": secret},
    )


@dataclass(frozen=True, repr=False)
class Config:
    """Validated settings; build it with ``Config.from_env()`` or ``Config(**overrides)``."""

    opensearch_url: str = setting(
        "http://localhost:9200", "OPENSEARCH_URL", _node_urls,
        "URL of the OpenSearch cluster the workbench fronts, or the URLs of several of its "
        "nodes separated by commas (same scheme, path and credentials): requests are spread "
        "over them and a node that stops answering is left out (docs/deployment.md).")
    opensearch_username: str | None = setting(
        None, "OPENSEARCH_USERNAME", _optional_str,
        "User for HTTP basic auth to the cluster: the identity jobs run as (docs/security.md).")
    opensearch_password: str | None = setting(
        None, "OPENSEARCH_PASSWORD", _optional_str,
        "Password for that user. Never logged or returned.", secret=True)
    anonymous_as_service: bool = setting(
        False, "WORKBENCH_ANONYMOUS_AS_SERVICE", _bool,
        "Lend OPENSEARCH_USERNAME's credentials to requests that bring no Authorization header "
        "(off: such requests reach the cluster without credentials, and a secured cluster "
        "answers 401). An empty Authorization header is never treated as none.")
    job_impersonation: bool = setting(
        False, "WORKBENCH_JOB_IMPERSONATION", _bool,
        "Jobs act for the user who created them through the security plugin's REST "
        "impersonation (opendistro_security_impersonate_as), so document- and field-level "
        "security applies to their searches; see docs/security.md.")
    opensearch_verify_certs: bool = setting(
        True, "OPENSEARCH_VERIFY_CERTS", _bool, "Verify the cluster's TLS certificate.")
    opensearch_ca_certs: str | None = setting(
        None, "OPENSEARCH_CA_CERTS", _optional_str,
        "CA bundle file for the cluster's TLS certificate.")
    opensearch_timeout: float = setting(
        120.0, "OPENSEARCH_TIMEOUT", _positive_float,
        "Seconds to wait for the cluster to answer one request.")
    redis_url: str = setting(
        "redis://localhost:6379/0", "REDIS_URL", _redis_url,
        "Redis: the Celery broker and the workbench's shared state. Either one Redis "
        "(redis://[:password@]host:port/db, rediss:// for TLS) or the Redis Sentinels that watch "
        "a primary and its replicas, in kombu's form: sentinel://[:password@]host:port[/db];"
        "sentinel://host2:port;... (the password and database are the primary's, given in the "
        "first entry), with WORKBENCH_REDIS_MASTER_NAME; every client then follows the primary "
        "the sentinels name (docs/deployment.md).")
    broker_url: str | None = setting(
        None, "CELERY_BROKER_URL", _optional_broker_url,
        "Celery broker URL; defaults to REDIS_URL. A sentinel:// list is read as for REDIS_URL.")
    redis_master_name: str | None = setting(
        None, "WORKBENCH_REDIS_MASTER_NAME", _optional_str,
        "With a sentinel:// REDIS_URL or CELERY_BROKER_URL: the name the sentinels know the "
        "primary by (their `sentinel monitor` line; kombu's master_name transport option). "
        "Required then, refused otherwise.")
    redis_sentinel_password: str | None = setting(
        None, "WORKBENCH_REDIS_SENTINEL_PASSWORD", _optional_str,
        "Password of the sentinels themselves (their requirepass), when they have one; the "
        "primary's password is the one in the first sentinel:// entry. Never logged or "
        "returned.", secret=True)
    task_queue: str = setting(
        "workbench", "WORKBENCH_QUEUE", _str,
        "Celery queue that jobs are sent to and workers consume.")
    host: str = setting("127.0.0.1", "WORKBENCH_HOST", _str, "Address the API server listens on.")
    port: int = setting(9400, "WORKBENCH_PORT", _port, "Port the API server listens on.")
    front: str = setting(
        "auto", "WORKBENCH_FRONT", _str,
        "What listens on WORKBENCH_PORT: haproxy (plain pass-through goes from HAProxy straight "
        "to the cluster, everything else to gunicorn), none (gunicorn alone), or auto (haproxy "
        "when installed). nginx, the former front, is read as haproxy.")
    web_workers: int = setting(
        4, "WORKBENCH_WEB_WORKERS", _positive_int, "Gunicorn worker processes of the API server.")
    web_threads: int = setting(
        16, "WORKBENCH_WEB_THREADS", _positive_int,
        "Threads per API worker process (concurrent requests per process).")
    web_max_requests: int = setting(
        20_000, "WORKBENCH_WEB_MAX_REQUESTS", _non_negative_int,
        "Requests an API worker process serves before a fresh process replaces it (gunicorn's "
        "max_requests; 0: never): a backstop against memory a long-lived process keeps. The "
        "worker finishes its requests in flight first.")
    web_max_requests_jitter: int = setting(
        2_000, "WORKBENCH_WEB_MAX_REQUESTS_JITTER", _non_negative_int,
        "Up to this many more requests, drawn at random for each worker, before it is replaced "
        "(gunicorn's max_requests_jitter), so that the workers are not all replaced at once.")
    web_recycle_bytes: int = setting(
        8 * 1024 * 1024, "WORKBENCH_WEB_RECYCLE_BYTES", _non_negative_int,
        "An API worker that has read a request body larger than this many bytes (an "
        "IMPORT_JUDGMENT of many ratings, say) is replaced by a fresh process once it has "
        "answered its requests in flight, which gives the memory the body took back to the "
        "system (docs/performance.md); 0: never. Pass-through bodies are streamed, not counted.")
    worker_concurrency: int = setting(
        2, "WORKBENCH_WORKER_CONCURRENCY", _positive_int, "Jobs one Celery worker runs at once.")
    max_request_bytes: int = setting(
        100 * 1024 * 1024, "WORKBENCH_MAX_REQUEST_BYTES", _positive_int,
        "Largest request body accepted, in bytes (OpenSearch's default is 100 MB).")
    job_timeout: int = setting(
        3600, "WORKBENCH_JOB_TIMEOUT", _positive_int,
        "Longest a job may run, in seconds of work (time spent waiting in the queue does not "
        "count); at least 60. A job is stopped 30 s before it (its soft limit: it stops as a "
        "cancel does and ends ERROR, the reason naming this setting, keeping its usage and "
        "progress); one that does not stop is interrupted 15 s before it, and its process is "
        "killed at it (Celery's time limits).")
    lease_seconds: float = setting(
        60.0, "WORKBENCH_LEASE_SECONDS", _positive_float,
        "TTL of a running job's lease in Redis, renewed every third of it. A job whose worker "
        "died is queued again within seconds of a worker starting on the same host; from "
        "another host once its lease lapses, within this plus two sweeps (each half as long).")
    worker_stop: str = setting(
        "handover", "WORKBENCH_WORKER_STOP", _worker_stop,
        "What a worker does with its running jobs when it is asked to stop (SIGTERM, or a "
        "first SIGINT): handover (each job stops at its next checkpoint, keeps what it paid "
        "for, releases its lease and is queued again at once for another worker; the worker "
        "then exits) or finish (Celery's warm shutdown: the jobs run to their end first, "
        "however long that takes). docs/reliability.md, \"A worker asked to stop hands its "
        "jobs over\".")
    worker_stop_seconds: int = setting(
        20, "WORKBENCH_WORKER_STOP_SECONDS", _positive_int,
        "With WORKBENCH_WORKER_STOP=handover: a job that has not handed itself over this many "
        "seconds after the stop signal is handed over by force (queued again, its process "
        "ends; calls in flight are lost), and the worker exits within this plus 5 s "
        "(its supervisor kills what is left then). Set the orchestrator's grace period above "
        "it: terminationGracePeriodSeconds (Kubernetes, 30 by default) or stop_grace_period "
        "(compose, 10 s by default) of at least this plus 10.")
    job_max_attempts: int = setting(
        3, "WORKBENCH_JOB_MAX_ATTEMPTS", _positive_int,
        "Times a job whose worker or message was lost is queued again before it ends ERROR.")
    outage_budget: float = setting(
        600.0, "WORKBENCH_OUTAGE_BUDGET", _positive_float,
        "Seconds a running job waits out an unreachable cluster or broker (retrying with "
        "backoff up to 30 s apart, from its first failure) before it gives up; a job that "
        "then cannot record ERROR is left to the lease sweeper, which queues it again.")
    judgment_wait: float = setting(
        1800.0, "WORKBENCH_JUDGMENT_WAIT", _positive_float,
        "Seconds an experiment (or scheduled run) whose judgment lists are still being "
        "generated waits for them, from its creation (fire time), before it ends ERROR; while "
        "it waits its job is queued again every few seconds rather than holding a worker.")
    models_file: str | None = setting(
        None, "WORKBENCH_MODELS_FILE", _optional_str,
        "JSON file of LLM models registered with the workbench (docs/llm-models.md).")
    models_json: str | None = setting(
        None, "WORKBENCH_MODELS", _optional_str,
        "The same list of registered LLM models, inline as JSON.")
    secret_key: str | None = setting(
        None, "WORKBENCH_SECRET_KEY", _fernet_keys,
        "Fernet key(s) that encrypt the API keys of models registered through the models "
        "route; comma-separated for rotation (the first encrypts, any decrypts). The same value "
        "on every API process and worker. Never logged or returned.", secret=True)
    model_endpoints: tuple[str, ...] | None = setting(
        None, "WORKBENCH_MODEL_ENDPOINTS", _regex_list,
        "Endpoints a model registered through the models route may use: a JSON array of "
        "regular expressions, one of which must match the whole endpoint URL. Unset: the "
        "hosted OpenAI-compatible APIs listed in docs/model-endpoints.md. Models registered "
        "in the environment are not limited.")
    model_private_endpoints: bool = setting(
        False, "WORKBENCH_MODEL_PRIVATE_ENDPOINTS", _bool,
        "Let models registered through the models route use loopback, private, link-local and "
        "other non-public addresses (a local llama.cpp server, say); off, such an endpoint is "
        "refused when registered and when called (docs/model-endpoints.md).")
    remote_endpoints: tuple[str, ...] | None = setting(
        None, "WORKBENCH_REMOTE_ENDPOINTS", _regex_list,
        "The search URLs a remote search configuration may use: a JSON array of regular "
        "expressions, one of which must match the whole connectionUrl. Unset (or []): every "
        "remote search configuration is refused.")
    remote_private_endpoints: bool = setting(
        False, "WORKBENCH_REMOTE_PRIVATE_ENDPOINTS", _bool,
        "Let remote search configurations reach loopback, private, link-local and other "
        "non-public addresses (a staging cluster on the same network, say); off, such a "
        "connectionUrl is refused when stored and when called.")
    remote_ca: str | None = setting(
        None, "WORKBENCH_REMOTE_CA", _optional_str,
        "A PEM file of CA certificates trusted for https remote search configurations, beside "
        "the system's.")
    remote_timeout: float = setting(
        30.0, "WORKBENCH_REMOTE_TIMEOUT", _positive_float,
        "Seconds to wait for one remote search configuration's answer (connecting: 5 s at "
        "most).")
    llm_concurrency: int = setting(
        8, "WORKBENCH_LLM_CONCURRENCY", _positive_int,
        "LLM calls one judgment job makes at once in one worker process (a split job makes "
        "this many in each process working on it).")
    split_queries: int | None = setting(
        None, "WORKBENCH_SPLIT_QUERIES", _split_queries,
        "Whether a judgment (LLM or reference) or pointwise/hybrid experiment is split into "
        "units that every free worker takes a share of. Unset (or auto): a job of at least 100 "
        "queries is split when its estimated work far exceeds what splitting costs and another "
        "worker is free; a number: every job of at least that many queries is split; 0 never "
        "splits.")
    llm_timeout: float = setting(
        120.0, "WORKBENCH_LLM_TIMEOUT", _positive_float, "Seconds to wait for one LLM answer.")
    llm_max_retries: int = setting(
        4, "WORKBENCH_LLM_MAX_RETRIES", _non_negative_int,
        "Retries of one LLM call on 429, 5xx and timeouts, with exponential backoff.")
    sync_deadline: float = setting(
        100.0, "WORKBENCH_SYNC_DEADLINE", _positive_float,
        "Seconds _evaluate, _evaluate/_batch (answered at once), _predict and judgments/"
        "_estimate may take while the caller waits; past it they answer 504 and call no model "
        "again. The front waits the longer of this and OPENSEARCH_TIMEOUT, plus 30 s.")
    evaluate_batch_limit: int = setting(
        50, "WORKBENCH_EVALUATE_BATCH_LIMIT", _positive_int,
        "Most evaluations one POST _evaluate/_batch judges while the caller waits; a larger "
        "batch is queued as a job (docs/evaluate.md).")
    ab_queries_index: str = setting(
        "ubi_queries", "WORKBENCH_AB_QUERIES_INDEX", _str,
        "UBI queries index the A/B tests record their impressions in (created with the UBI "
        "mapping when missing) and read them back from.")
    ab_events_index: str = setting(
        "ubi_events", "WORKBENCH_AB_EVENTS_INDEX", _str,
        "UBI events index the A/B test results read clicks from.")
    ab_flush_seconds: float = setting(
        0.5, "WORKBENCH_AB_FLUSH_SECONDS", _positive_float,
        "Seconds between two writes of the A/B test impressions an API process queued (one "
        "_bulk to ubi_queries; sooner once 500 wait; what is left is written at shutdown).")
    scheduler_interval: float = setting(
        10.0, "WORKBENCH_SCHEDULER_INTERVAL", _positive_float,
        "Seconds between two looks of the scheduler for scheduled experiments that are due.")
    log_level: str = setting(
        "INFO", "WORKBENCH_LOG_LEVEL", _str, "Log level: DEBUG, INFO, WARNING or ERROR.")
    log_format: str = setting(
        "text", "WORKBENCH_LOG_FORMAT", _str,
        "Log line format: text (one line, for people) or json (one JSON object per line with "
        "the job kind, entity id and task id as fields, for log shippers). Credentials are "
        "masked in both.")
    metrics_port: int | None = setting(
        None, "WORKBENCH_METRICS_PORT", _optional_port,
        "Port of the Prometheus metrics listener (docs/metrics.md); unset: no listener. Its own "
        "port, never the API's: every API path belongs to OpenSearch's namespace.")
    metrics_host: str = setting(
        "127.0.0.1", "WORKBENCH_METRICS_HOST", _str,
        "Address the metrics listener binds (loopback unless a scraper elsewhere needs it).")
    metrics_dir: str | None = setting(
        None, "WORKBENCH_METRICS_DIR", _optional_str,
        "Folder where every workbench process of this host writes its metric samples; one "
        "listener reports all processes that share it. Unset: a folder under the system's "
        "temporary directory, used only when WORKBENCH_METRICS_PORT or this is set.")
    index_mappings_dir: str = setting(
        str(REPO_ROOT / "index_mappings"), "WORKBENCH_INDEX_MAPPINGS_DIR", _str,
        "Folder of the system-index mapping files.")

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, **overrides: Any) -> Config:
        """Read every setting from the environment; a bad value raises ConfigError naming it."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = env.get(f.metadata["env"])
            if raw is None:
                continue
            try:
                values[f.name] = f.metadata["parse"](raw)
            except ValueError as exc:
                raise ConfigError(f"{f.metadata['env']}: {exc}") from None
        values.update(overrides)
        config = cls(**values)
        config.validate()
        return config

    def validate(self) -> None:
        if self.job_timeout < JOB_TIMEOUT_MIN:
            raise ConfigError(
                f"WORKBENCH_JOB_TIMEOUT: {self.job_timeout} s is below the minimum of "
                f"{JOB_TIMEOUT_MIN} s (a job is stopped {JOB_STOP_MARGIN} s before its "
                f"timeout to end cleanly, which leaves it "
                f"{JOB_TIMEOUT_MIN - JOB_STOP_MARGIN} s of work at the minimum)")
        if self.log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
            raise ConfigError(f"WORKBENCH_LOG_LEVEL: unknown level {self.log_level!r}")
        if self.log_format not in ("text", "json"):
            raise ConfigError(f"WORKBENCH_LOG_FORMAT: expected text or json, got "
                              f"{self.log_format!r}")
        if self.front not in ("auto", "haproxy", "none", "nginx"):  # nginx: the former front
            raise ConfigError(
                f"WORKBENCH_FRONT: expected auto, haproxy or none, got {self.front!r}")
        sentinel_urls = [env for env, url in (("REDIS_URL", self.redis_url),
                                              ("CELERY_BROKER_URL", self.broker_url))
                         if is_sentinel_url(url)]
        if sentinel_urls and not self.redis_master_name:
            raise ConfigError(
                f"WORKBENCH_REDIS_MASTER_NAME: {sentinel_urls[0]} names Redis Sentinels "
                "(sentinel://); give the name they know the primary by (the name in their "
                "`sentinel monitor` line)")
        if self.redis_master_name and not sentinel_urls:
            raise ConfigError(
                "WORKBENCH_REDIS_MASTER_NAME: set, but neither REDIS_URL nor CELERY_BROKER_URL "
                "is a sentinel:// URL; without sentinels there is no master name to give")
        if not Path(self.index_mappings_dir).is_dir():
            raise ConfigError(
                f"WORKBENCH_INDEX_MAPPINGS_DIR: {self.index_mappings_dir} is not a folder"
            )

    def with_overrides(self, **overrides: Any) -> Config:
        return replace(self, **overrides)

    @property
    def job_interrupt_after(self) -> int:
        """Celery's soft time limit: a job that did not stop at its own limit (``job_timeout``
        less ``JOB_STOP_MARGIN``) is interrupted after this many seconds."""
        return self.job_timeout - JOB_INTERRUPT_MARGIN

    @property
    def celery_broker_url(self) -> str:
        return self.broker_url or self.redis_url

    def __repr__(self) -> str:
        return f"Config({self.safe_items()!r})"

    @property
    def opensearch_nodes(self) -> tuple[str, ...]:
        """The node URLs of ``OPENSEARCH_URL`` without credentials: where requests are sent."""
        return tuple(redact_url(url.strip()) for url in self.opensearch_url.split(","))

    @property
    def opensearch_scheme(self) -> str:
        return urlsplit(self.opensearch_nodes[0]).scheme

    @property
    def opensearch_auth(self) -> tuple[str, str] | None:
        """Basic-auth pair from OPENSEARCH_USERNAME/PASSWORD, else from the URLs' user info."""
        if self.opensearch_username:
            return (self.opensearch_username, self.opensearch_password or "")
        parts = urlsplit(self.opensearch_url.split(",")[0].strip())
        if parts.username:
            return (unquote(parts.username), unquote(parts.password or ""))
        return None

    @property
    def opensearch_authorization(self) -> str | None:
        """The ``Authorization`` header value for ``opensearch_auth`` (HTTP basic), if any."""
        auth = self.opensearch_auth
        if auth is None:
            return None
        return "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()

    @property
    def opensearch_url_safe(self) -> str:
        """The node URLs with any credentials removed, for messages and logs."""
        return ", ".join(self.opensearch_nodes)

    def safe_items(self) -> dict[str, Any]:
        """Settings for display: secrets masked, URLs without credentials."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.metadata["secret"] and value:
                value = "****"
            elif f.name == "opensearch_url":
                value = ",".join(self.opensearch_nodes)
            elif isinstance(value, str) and "://" in value:
                value = redact_url(value)
            out[f.name] = value
        return out


def redact_url(url: str) -> str:
    """Drop ``user:password@`` from a URL so it can be shown (also from one whose port does not
    parse, which a message may have to name), and from each entry of a sentinel:// list."""
    if is_sentinel_url(url) and ";" in url:
        return ";".join(redact_url(entry) for entry in url.split(";"))
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def settings_table() -> list[Field[Any]]:
    """The Config fields in declaration order, each with env/help/secret in ``metadata``."""
    return list(fields(Config))


def markdown_table() -> str:
    """The configuration table of docs/configuration.md, rendered from the Config fields."""
    rows = ["| Variable | Default | Meaning |", "|---|---|---|"]
    for f in settings_table():
        default = f.default
        if f.name == "index_mappings_dir":
            default = "`index_mappings/` of this checkout"
        elif default is None:
            default = "(unset)"
        else:
            default = f"`{default}`"
        rows.append(f"| `{f.metadata['env']}` | {default} | {f.metadata['help']} |")
    return "\n".join(rows)
