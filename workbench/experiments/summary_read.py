"""Reading what an experiment's runs stored, for its summary: every call is made with the
client's current identity (the caller's, while answering a request).

Evaluation results are read in pages with ``search_after`` on ``id`` (a hybrid run over 150
queries stores 12,300 of them, past any single page), only the fields the summary needs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opensearchpy import OpenSearch

from workbench.experiments.summary_build import Run
from workbench.metrics import validate_ratings
from workbench.store.indices import (
    EVALUATION_INDEX,
    HISTORY_INDEX,
    JUDGMENT_INDEX,
    REMOTE_CONFIG_INDEX,
    SEARCH_CONFIG_INDEX,
    VARIANT_INDEX,
)
from workbench.store.repository import Repository

FIELDS = ["searchConfigurationId", "searchText", "documentIds", "metrics", "exactMetrics",
          "condensedMetrics",
          "experimentVariantParameters", "scheduledRunId"]


def evaluations(client: OpenSearch, experiment_id: str,
                run_id: str | None = None) -> list[dict[str, Any]]:
    """The evaluation results of the experiment's own run, or of one scheduled run."""
    filters: list[dict[str, Any]] = [{"term": {"experimentId": experiment_id}}]
    query: dict[str, Any] = {"bool": {"filter": filters}}
    if run_id is None:
        query["bool"]["must_not"] = [{"exists": {"field": "scheduledRunId"}}]
    else:
        filters.append({"term": {"scheduledRunId": run_id}})
    return list(Repository(client, EVALUATION_INDEX).sorted_sources(query, FIELDS))


def variant_errors(client: OpenSearch, experiment_id: str) -> int:
    """How many variants of the experiment's run ended ERROR (a failed search)."""
    answer = Repository(client, VARIANT_INDEX).search({
        "size": 0, "track_total_hits": True,
        "query": {"bool": {"filter": [{"term": {"experimentId": experiment_id}},
                                      {"term": {"status": "ERROR"}}]}}})
    return int(answer["hits"]["total"]["value"])


def configuration_names(client: OpenSearch, config_ids: list[str]) -> dict[str, str]:
    """id -> name of each configuration, local or else remote (issue 47)."""
    repos = (Repository(client, SEARCH_CONFIG_INDEX), Repository(client, REMOTE_CONFIG_INDEX))
    names = {}
    for config_id in config_ids:
        for repo in repos:
            source = repo.get_source(config_id, ["name"])
            if source and isinstance(source.get("name"), str):
                names[config_id] = source["name"]
                break
    return names


def judged_documents(client: OpenSearch, judgment_ids: list[str]) -> dict[str, set[str]]:
    """Query -> the doc ids rated for it in any of the judgment lists (the first row of a query
    in each list, as a run looks it up). LLM judgments of a query set with custom fields name
    the query ``text#{fields}``: those rows count for ``text`` too."""
    judged: dict[str, set[str]] = {}
    repo = Repository(client, JUDGMENT_INDEX)
    for judgment_id in judgment_ids:
        source = repo.get_source(judgment_id, ["judgmentRatings"])
        seen: set[str] = set()
        for row in (source or {}).get("judgmentRatings") or []:
            query = str(row.get("query"))
            if query in seen:
                continue
            seen.add(query)
            docs = {str(r.get("docId")) for r in row.get("ratings") or []
                    if isinstance(r, dict) and r.get("docId") is not None}
            judged.setdefault(query, set()).update(docs)
            if "#" in query:
                judged.setdefault(query.split("#", 1)[0], set()).update(docs)
    return judged


def failed_judgment_queries(client: OpenSearch, judgment_ids: list[str]
                            ) -> list[dict[str, Any]]:
    """A ``judgment_failed_queries`` warning for each LLM judgment list that has failed
    queries: their documents left unrated count as unrated (irrelevant) in the metrics until a
    ``_retry`` rates them."""
    warnings = []
    repo = Repository(client, JUDGMENT_INDEX)
    for judgment_id in judgment_ids:
        source = repo.get_source(judgment_id, ["name", "type", "metadata.failedQueries",
                                               "metadata.totalQueries",
                                               "metadata.lastFailureReason"]) or {}
        meta = source.get("metadata") or {}
        failed = int(meta.get("failedQueries") or 0)
        # A filled list is not retried: filling again rates what it left (the cache keeps the
        # rest).
        remedy = ("POST experiments/{id}/_fill rates them again" if source.get("type") ==
                  "FILLED_JUDGMENT" else "POST judgments/{id}/_retry rates them")
        if failed:
            warnings.append({
                "level": "warning", "code": "judgment_failed_queries",
                "judgmentId": judgment_id, "failedQueries": failed,
                "lastFailureReason": meta.get("lastFailureReason"),
                "message": f"judgment list [{source.get('name', judgment_id)}] failed on "
                           f"{failed} of {meta.get('totalQueries')} queries (last reason: "
                           f"{meta.get('lastFailureReason')}); the documents it left unrated "
                           f"count as unrated until {remedy}"})
    return warnings


def human_ratings(client: OpenSearch, judgment_id: str,
                  keep: Callable[[dict[str, Any]], bool] | None = None,
                  ) -> tuple[dict[str, Any], dict[str, dict[str, float]]] | None:
    """(the judgment list, query -> doc id -> rating) of a list people made, or None when there
    is no such list. The first row of a query counts, as a run looks it up; a row keyed
    ``text#{fields}`` (LLM judgments of custom fields) counts for ``text`` when ``text`` has
    none. ``keep`` chooses the ratings that count (a merged list's human ones). Raises
    ``MetricError`` naming the first rating that is not a number."""
    source = Repository(client, JUDGMENT_INDEX).get_source(judgment_id)
    if source is None:
        return None
    ratings: dict[str, dict[str, float]] = {}
    for row in source.get("judgmentRatings") or []:
        if not isinstance(row, dict):
            continue
        query = str(row.get("query"))
        for key in (query, query.split("#", 1)[0]):
            if key not in ratings:
                ratings[key] = validate_ratings(
                    {str(r.get("docId")): r.get("rating") for r in row.get("ratings") or []
                     if isinstance(r, dict) and r.get("docId") is not None
                     and (keep is None or keep(r))})
    return source, ratings


def scheduled_runs(client: OpenSearch, experiment_id: str) -> list[Run]:
    """The experiment's completed scheduled runs, oldest first, with their evaluation results
    (pairwise runs keep their metrics in the history document's ``results``)."""
    answer = Repository(client, HISTORY_INDEX).search({
        "size": 1_000, "sort": [{"timestamp": {"order": "asc"}}],
        "query": {"bool": {"filter": [{"term": {"experimentId": experiment_id}},
                                      {"term": {"status": "COMPLETED"}}]}}})
    runs = []
    for hit in answer["hits"]["hits"]:
        source = hit["_source"]
        run_id = str(source.get("id") or hit["_id"])
        runs.append(Run(results=list(source.get("results") or []),
                        evaluations=evaluations(client, experiment_id, run_id),
                        run_id=run_id, timestamp=source.get("timestamp")))
    return runs

