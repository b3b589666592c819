"""What every experiment run needs: its inputs loaded once, judgment lookups, stable document ids
and a bulk writer for evaluation results and variants."""

from __future__ import annotations

import hashlib
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from workbench.jobs.base import JobFailed
from workbench.jobs.control import JobControl
from workbench.metrics import MetricError, validate_ratings
from workbench.querysets.entries import QueryEntry, read_entries
from workbench.remote.configs import RemoteConfig
from workbench.remote.search import load_config
from workbench.schemas.configuration_list import REMOTE_LABEL, local_only_reason
from workbench.schemas.experiments import HYBRID
from workbench.services import Services
from workbench.store import bulk
from workbench.store.identity import carry
from workbench.store.indices import (
    EVALUATION_INDEX,
    JUDGMENT_INDEX,
    QUERY_SET_INDEX,
    REMOTE_CONFIG_INDEX,
    SEARCH_CONFIG_INDEX,
    VARIANT_INDEX,
)
from workbench.store.repository import Repository, now_iso
from workbench.store.search import missing_pipeline

_NAMESPACE = uuid.UUID("6b1f0d2e-4c1a-4a8e-9a51-3f1c2b7d9e10")
#: documents of a run's inputs read at once when it starts
LOAD_THREADS = 4


class RunTimedOut(JobFailed):
    """A scheduled run went past ``scheduled_experiments_timeout``."""

    ending = "timeout"


def stable_id(*parts: str) -> str:
    """The same inputs always name the same document, so a re-run overwrites instead of adding.

    A name-based (version 5) UUID, built straight from SHA-1: ``uuid.uuid5`` is several times
    slower, which shows when a hybrid run names tens of thousands of documents."""
    digest = bytearray(hashlib.sha1(_NAMESPACE.bytes + "\x1f".join(parts).encode()).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50
    digest[8] = (digest[8] & 0x3F) | 0x80
    text = digest.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


@dataclass
class RunContext:
    svc: Services
    experiment: dict[str, Any]
    query_set: dict[str, Any]
    configs: list[tuple[str, dict[str, Any]]]
    judgments: list[dict[str, Any]]
    run_id: str | None = None
    deadline: float | None = None
    control: JobControl | None = None
    #: the remote search configurations among ``configs`` (issue 47), by id
    remote: dict[str, RemoteConfig] = field(default_factory=dict)
    entries: list[QueryEntry] = field(default_factory=list)
    _ratings: dict[str, dict[str, float]] = field(default_factory=dict)
    _rows: list[dict[str, dict[str, Any]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.entries = read_entries(self.query_set)
        # Per judgment, the first row of each query (docs/contract.md, "Evaluation results"),
        # indexed once.
        for judgment in self.judgments:
            rows: dict[str, dict[str, Any]] = {}
            for row in judgment.get("judgmentRatings") or []:
                rows.setdefault(str(row.get("query")), row)
            self._rows.append(rows)

    @property
    def experiment_id(self) -> str:
        return str(self.experiment["id"])

    @property
    def size(self) -> int:
        return int(self.experiment["size"])

    def check_time(self) -> None:
        """Between units of work: stop a cancelled run, and a scheduled run past its time."""
        if self.control is not None:
            self.control.check()
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise RunTimedOut("the scheduled run exceeded scheduled_experiments_timeout")

    def advance(self, pairs: int) -> None:
        """``pairs`` more (query, search configuration) pairs done (throttled progress)."""
        if self.control is not None:
            self.control.advance(pairs)

    def ratings(self, entry: QueryEntry) -> dict[str, float]:
        """docId -> rating for one query over every judgment of the experiment (later lists win);
        the plain query text is looked up first, then the LLM key with custom fields
        (docs/contract.md, "Judgment cache")."""
        cached = self._ratings.get(entry.key)
        if cached is not None:
            return cached
        merged: dict[str, Any] = {}
        for rows in self._rows:
            row = rows.get(entry.query_text) or rows.get(entry.key)
            if row:
                merged.update({str(r["docId"]): r.get("rating") for r in row.get("ratings") or []})
        try:
            parsed = validate_ratings(merged)
        except MetricError as exc:
            raise JobFailed(str(exc)) from exc
        self._ratings[entry.key] = parsed
        return parsed

    def evaluation_doc(self, evaluation_id: str, config_id: str, entry: QueryEntry,
                       doc_ids: list[str], metrics: dict[str, list[dict[str, Any]]],
                       variant_id: str | None, parameters: str | None,
                       took: int | None) -> dict[str, Any]:
        """A ``search-relevance-evaluation-result`` document (docs/contract.md, "Stored documents"),
        optional keys omitted; ``metrics`` is a ``pointwise.metrics_docs`` entry (the plugin's
        rounded ``metrics`` and the workbench's added ``exactMetrics`` and
        ``condensedMetrics``)."""
        doc: dict[str, Any] = {
            "id": evaluation_id,
            "timestamp": now_iso(),
            "searchConfigurationId": config_id,
            "searchText": entry.query_text,
            "judgmentIds": list(self.experiment.get("judgmentList") or []),
            "documentIds": doc_ids,
            "metrics": metrics["metrics"],
            "exactMetrics": metrics["exactMetrics"],
            "condensedMetrics": metrics["condensedMetrics"],
            "experimentId": self.experiment_id,
        }
        if variant_id:
            doc["experimentVariantId"] = variant_id
        if parameters:
            doc["experimentVariantParameters"] = parameters
        if self.run_id:
            doc["scheduledRunId"] = self.run_id
        if took is not None:
            doc["took"] = took
        return doc


def load(svc: Services, experiment: dict[str, Any], run_id: str | None = None,
         timeout_seconds: float | None = None) -> RunContext:
    """Load the query set, configurations and judgments the experiment names: every document
    asked for at once (a small run's start is a few round trips otherwise), the first missing
    one named in the order query set, configurations, judgments. The ids the experiment lists
    in ``remoteSearchConfigurationIds`` are remote search configurations (issue 47): their
    stored documents (the password left out) and their definitions (``ctx.remote``)."""
    def get(index: str, entity_id: str) -> dict[str, Any] | None:
        return Repository(svc.client, index).get_source(entity_id)

    def need(found: Future[dict[str, Any] | None], label: str, entity_id: str
             ) -> dict[str, Any]:
        source = found.result()
        if source is None:
            raise JobFailed(f"{label} [{entity_id}] does not exist")
        return source

    config_ids = list(experiment.get("searchConfigurationList") or [])
    remote_ids = set(experiment.get("remoteSearchConfigurationIds") or [])
    if remote_ids and experiment.get("type") == HYBRID:  # refused at creation already
        first = next(c for c in config_ids if c in remote_ids)
        raise JobFailed(local_only_reason(f"{HYBRID} experiments", first))
    judgment_ids = list(experiment.get("judgmentList") or [])
    with ThreadPoolExecutor(LOAD_THREADS, thread_name_prefix="load") as pool:
        query_set_f = pool.submit(carry(get), QUERY_SET_INDEX, experiment["querySetId"])
        config_fs = [pool.submit(carry(get), REMOTE_CONFIG_INDEX if c in remote_ids
                                 else SEARCH_CONFIG_INDEX, c) for c in config_ids]
        remote_fs = {c: pool.submit(carry(load_config), svc, c) for c in remote_ids}
        judgment_fs = [pool.submit(carry(get), JUDGMENT_INDEX, j) for j in judgment_ids]
        query_set = need(query_set_f, "QuerySet", experiment["querySetId"])
        configs = [(c, need(f, REMOTE_LABEL if c in remote_ids else "SearchConfiguration", c))
                   for c, f in zip(config_ids, config_fs, strict=True)]
        remote = {}
        for config_id, found in remote_fs.items():
            remote_config = found.result()
            if remote_config is None:
                raise JobFailed(f"{REMOTE_LABEL} [{config_id}] does not exist")
            remote[config_id] = remote_config
        # The password is never part of what a run keeps of a remote configuration's document
        # (its signature covers the rest: experiments/signature.py).
        configs = [(c, {k: v for k, v in config.items() if k != "passwordEncrypted"}
                    if c in remote_ids else config) for c, config in configs]
        # HYBRID_OPTIMIZER does not apply the configuration's named pipeline (it uses its own).
        if experiment.get("type") != HYBRID:
            missing = missing_pipeline(svc.client, [config for c, config in configs
                                                    if c not in remote_ids])
            if missing:
                raise JobFailed(missing)
        judgments = [need(f, "Judgment", j) for j, f in zip(judgment_ids, judgment_fs,
                                                              strict=True)]
    deadline = time.monotonic() + timeout_seconds if timeout_seconds else None
    return RunContext(svc, experiment, query_set, configs, judgments, run_id, deadline,
                      remote=remote)


class Writer:
    """Writes evaluation results and variants with ``_bulk`` in a background thread, so that
    writing one batch overlaps with searching for the next."""

    def __init__(self, svc: Services, batch: int = 1000) -> None:
        self.svc = svc
        self.batch = batch
        self.actions: list[dict[str, Any]] = []
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="writer")
        self.pending: list[Future[Any]] = []

    def add(self, index: str, doc: dict[str, Any]) -> None:
        self.actions.append({"_index": index, "_id": doc["id"], "_source": doc})
        if len(self.actions) >= self.batch:
            self.send()

    def send(self) -> None:
        """Hand what is buffered to the background writer now."""
        if self.actions:
            actions, self.actions = self.actions, []
            self.pending.append(self.pool.submit(
                carry(bulk.write), self.svc.client, actions, chunk_size=len(actions),
                max_chunk_bytes=100 * 1024 * 1024, request_timeout=300))

    def flush(self, refresh: bool = False) -> None:
        """Wait for every write (raising the first failure), then refresh once."""
        self.send()
        try:
            for future in self.pending:
                future.result()
        finally:
            self.pending = []
            self.pool.shutdown(wait=True)
            self.pool = ThreadPoolExecutor(1, thread_name_prefix="writer")
        if refresh:
            bulk.refresh(self.svc.client, f"{EVALUATION_INDEX},{VARIANT_INDEX}")

