"""What the workbench counts for operators: every Prometheus metric, defined once, with the small
helpers the other layers call. docs/metrics.md lists them with their labels.

Importing this module imports ``prometheus_client``, which decides at that moment whether samples
go to multiprocess files: ``telemetry.exporter.enable`` must have run first in a process that
exports (the ``workbench`` command calls it before anything else is imported). Without it the
samples stay in the process, unread, at the cost of a dictionary update.

Labels are bounded sets: route templates, job kinds, entity types, model ids of the registry or
the cluster, outcomes. An entity id or a query text is never a label.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client import Counter, Gauge, Histogram

#: job and request durations: a quick search to an hour-long judgment
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300,
                    600, 1800, 3600)
JOB_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200)

HTTP_REQUESTS = Counter(
    "workbench_http_requests_total", "API requests answered, by route template and status.",
    ["method", "route", "status"])
HTTP_DURATION = Histogram(
    "workbench_http_request_duration_seconds",
    "Time from a request's arrival to the end of its answer's body.",
    ["method", "route"], buckets=DURATION_BUCKETS)

ENTITIES_CREATED = Counter(
    "workbench_entities_created_total",
    "Query sets, search configurations, judgments and experiments created, by kind and type.",
    ["kind", "type"])
JOBS_CREATED = Counter(
    "workbench_jobs_created_total", "Jobs queued by the API or the scheduler.", ["job", "type"])
JOBS_STARTED = Counter(
    "workbench_jobs_started_total", "Job runs a worker started (a re-run counts again).",
    ["job"])
JOBS_ENDED = Counter(
    "workbench_jobs_ended_total",
    "Job runs ended, by ending: completed, error, cancelled or timeout.", ["job", "type", "ending"])
JOB_DURATION = Histogram(
    "workbench_job_duration_seconds", "Time a job run worked, from its start to its ending.",
    ["job", "type", "ending"], buckets=JOB_BUCKETS)
LEASE_RECOVERIES = Counter(
    "workbench_lease_recoveries_total",
    "Work taken over from a dead process of the same host: a job's lease, or split units.",
    ["what"])
SWEEPER_ACTIONS = Counter(
    "workbench_sweeper_jobs_total",
    "Lost jobs the lease sweeper found: requeued, or failed after the last attempt.",
    ["action"])

LLM_CALLS = Counter(
    "workbench_llm_calls_total", "Model calls (each with its own retries), by outcome: ok or "
    "error.", ["model", "outcome"])
LLM_DURATION = Histogram(
    "workbench_llm_call_duration_seconds", "Time of one model call, retries included.",
    ["model"], buckets=DURATION_BUCKETS)
LLM_INPUT_TOKENS = Counter(
    "workbench_llm_input_tokens_total", "Prompt tokens of answered model calls.", ["model"])
LLM_OUTPUT_TOKENS = Counter(
    "workbench_llm_output_tokens_total", "Answer tokens of answered model calls.", ["model"])
LLM_COST = Counter(
    "workbench_llm_cost_total",
    "What answered calls cost, in the currency of the model's pricing (priced models only).",
    ["model"])

# Monitors (workbench/monitors): the label is the monitor's id, bounded by the monitors defined.
MONITOR_VALUE = Gauge(
    "workbench_monitor_value", "A monitor's last completed run: the mean of each metric.",
    ["monitor", "metric"], multiprocess_mode="mostrecent")
MONITOR_STATE = Gauge(
    "workbench_monitor_state",
    "A monitor's last completed run: 0 OK, 1 INCONCLUSIVE, 2 ALERT, 3 JUDGE_DRIFT.",
    ["monitor"], multiprocess_mode="mostrecent")
MONITOR_RUNS = Counter(
    "workbench_monitor_runs_total", "Monitor runs ended, by state (ERROR for a failed run).",
    ["monitor", "state"])
MONITOR_COST = Counter(
    "workbench_monitor_cost_total",
    "What monitor runs' judge calls cost, in the currency of the model's pricing.",
    ["monitor"])

OPENSEARCH_REQUESTS = Counter(
    "workbench_opensearch_requests_total",
    "Requests to the cluster, by outcome: ok, client_error (4xx), server_error (5xx), "
    "timeout or unreachable; via: client (the workbench's own) or passthrough.",
    ["via", "outcome"])
OPENSEARCH_DURATION = Histogram(
    "workbench_opensearch_request_duration_seconds",
    "Time of one request to the cluster, to its answer's headers.",
    ["via"], buckets=DURATION_BUCKETS)

#: the ``job`` label of each task (any other task: the last part of its name)
JOB_KINDS = {
    "workbench.judgments.generate": "judgment",
    "workbench.judgments.retry": "judgment_retry",
    "workbench.experiments.run": "experiment",
    "workbench.experiments.scheduled_run": "scheduled_experiment",
    "workbench.evaluation.batch": "evaluate_batch",
    "workbench.monitors.run": "monitor_run",
}


def job_kind(task_name: str) -> str:
    return JOB_KINDS.get(task_name) or task_name.rsplit(".", 1)[-1]


#: the entity type of the job this context runs (LLM_JUDGMENT, PAIRWISE_COMPARISON ...), set
#: by the job once it has read its entity
_job_type: contextvars.ContextVar[str] = contextvars.ContextVar("workbench_job_type",
                                                                default="")


def note_job_type(value: object) -> None:
    """Label the running job's metrics with its entity's type."""
    _job_type.set(str(value) if value else "")


def job_type() -> str:
    return _job_type.get()


@contextmanager
def job_run(job: str) -> Iterator[dict[str, str]]:
    """Count one job run: started on entry; ended with the ``ending`` the caller puts in the
    yielded dict (``completed`` unless it says otherwise or an exception escapes: ``error``).
    A run sent back to the queue (``ending`` set to ``""``) is not an ending."""
    token = _job_type.set("")
    JOBS_STARTED.labels(job).inc()
    started = time.monotonic()
    outcome = {"ending": "completed"}
    try:
        yield outcome
    except BaseException:
        if outcome["ending"] == "completed":
            outcome["ending"] = "error"
        raise
    finally:
        ending = outcome["ending"]
        if ending:
            labels = (job, _job_type.get(), ending)
            JOBS_ENDED.labels(*labels).inc()
            JOB_DURATION.labels(*labels).observe(time.monotonic() - started)
        _job_type.reset(token)


def opensearch_outcome(status: int | None, timed_out: bool = False) -> str:
    """The outcome label of a request to the cluster."""
    if timed_out:
        return "timeout"
    if status is None:
        return "unreachable"
    if status >= 500:
        return "server_error"
    if status >= 400:
        return "client_error"
    return "ok"


def count_opensearch(via: str, outcome: str, seconds: float) -> None:
    OPENSEARCH_REQUESTS.labels(via, outcome).inc()
    OPENSEARCH_DURATION.labels(via).observe(seconds)


def count_llm_call(model: str, seconds: float, tokens: tuple[int, int] | None,
                   cost: float | None) -> None:
    """One model call: ``tokens`` (input, output) of an answered call, None for a failed one."""
    LLM_DURATION.labels(model).observe(seconds)
    if tokens is None:
        LLM_CALLS.labels(model, "error").inc()
        return
    LLM_CALLS.labels(model, "ok").inc()
    LLM_INPUT_TOKENS.labels(model).inc(tokens[0])
    LLM_OUTPUT_TOKENS.labels(model).inc(tokens[1])
    if cost is not None:
        LLM_COST.labels(model).inc(cost)
