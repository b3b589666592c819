"""The pool of a finished experiment: for every query, the top ``size`` documents of every
configuration (and hybrid variant), read from the run's stored evaluation results (no new
search), and which of those pairs the experiment's judgment lists rate.

The pool is ordered rank first (every configuration's first hit, then every second hit...), as
the labelling sample pools (experiments/label_sample.py), so a budget that stops early has
rated the top of every configuration alike.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from workbench.holes.sources import Lists
from workbench.querysets.entries import QueryEntry, read_entries
from workbench.store.indices import (
    EVALUATION_INDEX,
    JUDGMENT_INDEX,
    QUERY_SET_INDEX,
    SEARCH_CONFIG_INDEX,
)
from workbench.store.repository import Repository

#: the experiment types whose runs store each configuration's ranked documents
POOLED_TYPES = ("POINTWISE_EVALUATION", "HYBRID_OPTIMIZER")


class Refused(Exception):
    """The experiment cannot be filled (the API's 4xx, the job's ERROR): ``status`` and why."""

    def __init__(self, reason: str, status: int = 400) -> None:
        super().__init__(reason)
        self.status = status


@dataclass
class Pool:
    entries: list[QueryEntry]  # the pooled queries, in query-set order
    docs: dict[str, list[str]]  # query text -> pooled document ids, rank first
    rated: dict[str, set[str]] = field(default_factory=dict)  # query text -> pooled and rated

    def unrated(self, entry: QueryEntry) -> list[str]:
        rated = self.rated.get(entry.query_text) or set()
        return [d for d in self.docs[entry.query_text] if d not in rated]

    def counts(self) -> dict[str, int]:
        pairs = sum(len(docs) for docs in self.docs.values())
        rated = sum(len(docs) for docs in self.rated.values())
        return {"queries": len(self.entries), "pairs": pairs, "rated": rated,
                "unrated": pairs - rated}


@dataclass
class Experiment:
    """What a fill reads of an experiment: its query set's entries, its judgment lists, the
    one index its configurations search, and its pool."""

    doc: dict[str, Any]
    lists: Lists
    index: str
    pool: Pool


def check(experiment: dict[str, Any]) -> None:
    """The experiment is finished and of a type whose runs store rankings."""
    experiment_id = experiment.get("id")
    status = experiment.get("status")
    if status != "COMPLETED":
        raise Refused(f"Experiment [{experiment_id}] is {status}; only a COMPLETED experiment "
                      "has rankings to pool", 409)
    if experiment.get("type") not in POOLED_TYPES:
        raise Refused(f"Experiment [{experiment_id}] is of type {experiment.get('type')}; only "
                      f"{' and '.join(POOLED_TYPES)} experiments store the rankings to pool")


def _need(repo: Repository, entity_id: str, label: str) -> dict[str, Any]:
    source = repo.get_source(entity_id)
    if source is None:
        raise Refused(f"{label} [{entity_id}] does not exist")
    return source


def index_of(client: Any, experiment: dict[str, Any]) -> str:
    """The one index every configuration searches (ratings are matched by document id). A
    remote search configuration's documents cannot be read again by id (docs/engines.md)."""
    remote = experiment.get("remoteSearchConfigurationIds") or []
    if remote:
        raise Refused(f"the holes of experiment [{experiment.get('id')}] cannot be filled: it "
                      f"searches remote search configuration [{remote[0]}], whose documents "
                      "cannot be read again by id; fill holes of local configurations only")
    repo = Repository(client, SEARCH_CONFIG_INDEX)
    indices = sorted({str(_need(repo, str(c), "SearchConfiguration").get("index"))
                      for c in experiment.get("searchConfigurationList") or []})
    if len(indices) != 1:
        raise Refused(f"the configurations of experiment [{experiment.get('id')}] search "
                      f"different indices [{', '.join(indices)}]; ratings are matched by "
                      "document id, so its holes can be filled only when they search one")
    return indices[0]


def _evaluations(client: Any, experiment_id: str) -> Iterator[dict[str, Any]]:
    """The evaluation results of the experiment's own run (not its scheduled runs)."""
    query = {"bool": {"filter": [{"term": {"experimentId": experiment_id}}],
                      "must_not": [{"exists": {"field": "scheduledRunId"}}]}}
    return Repository(client, EVALUATION_INDEX).sorted_sources(
        query, ["searchConfigurationId", "searchText", "documentIds",
                "experimentVariantParameters"])


def read(client: Any, experiment: dict[str, Any], size: int) -> Experiment:
    """The experiment's inputs and pool (the experiment is ``check``ed first)."""
    check(experiment)
    index = index_of(client, experiment)
    query_set = _need(Repository(client, QUERY_SET_INDEX), str(experiment.get("querySetId")),
                      "QuerySet")
    judgments = Repository(client, JUDGMENT_INDEX)
    lists = Lists([_need(judgments, str(j), "Judgment")
                   for j in experiment.get("judgmentList") or []])
    order = {str(c): n for n, c in enumerate(experiment.get("searchConfigurationList") or [])}
    rankings: dict[str, list[tuple[tuple[int, str], list[str]]]] = {}
    for doc in _evaluations(client, str(experiment["id"])):
        rank = (order.get(str(doc.get("searchConfigurationId")), len(order)),
                str(doc.get("experimentVariantParameters") or ""))
        rankings.setdefault(str(doc.get("searchText")), []).append(
            (rank, [str(d) for d in doc.get("documentIds") or []][:size]))
    entries, docs, rated, seen = [], {}, {}, set()
    for entry in read_entries(query_set):
        text = entry.query_text
        if text in seen or text not in rankings:
            continue
        seen.add(text)
        lists_of = [ids for _, ids in sorted(rankings[text], key=lambda r: r[0])]
        pooled: dict[str, None] = {}
        for position in range(size):
            for ids in lists_of:
                if position < len(ids):
                    pooled.setdefault(ids[position])
        entries.append(entry)
        docs[text] = list(pooled)
        _, known = lists.seen(entry)
        rated[text] = {d for d in pooled if d in known}
    return Experiment(experiment, lists, index, Pool(entries, docs, rated))
