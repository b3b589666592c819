"""``GET /stats[/{stat}]`` and ``GET /{nodeId}/stats[/{stat}]`` (docs/contract.md, "Stats").

The workbench is one "node" whose counters every API process and worker share (in Redis); its
22-character id is kept with the plugin settings.
"""

from __future__ import annotations

import re
from typing import Any

from flask import Blueprint, Response, request

from workbench.api import flag, json_response, services
from workbench.api.entities import plugin_settings
from workbench.errors import BadRequest, TextError
from workbench.store import cluster as cluster_info
from workbench.telemetry.event_stats import EVENT_STATS, INFO_STATS, EventSnapshot, full_path

bp = Blueprint("stats", __name__)

_VALID = re.compile(r"^[A-Za-z0-9\-_]+$")


@bp.get("/stats", defaults={"stat": None})
@bp.get("/stats/<stat>")
def cluster_stats(stat: str | None) -> Response:
    return _stats(None, stat)


@bp.get("/<node_id>/stats", defaults={"stat": None})
@bp.get("/<node_id>/stats/<stat>")
def node_stats(node_id: str, stat: str | None) -> Response:
    return _stats(node_id, stat)


def _stats(node_param: str | None, stat_param: str | None) -> Response:
    settings = plugin_settings()
    if not settings.value("stats_enabled"):
        raise TextError(403, "Search Relevance Workbench stats is disabled")
    events, infos = _requested(stat_param)
    flatten = flag("flat_stat_paths", False)
    metadata = flag("include_metadata", False)
    include_nodes = flag("include_individual_nodes", True)
    include_all = flag("include_all_nodes", True)
    include_info = flag("include_info", True)

    node_id = settings.node_id
    nodes = [node_id]
    if node_param is not None:
        wanted = [n for n in node_param.split(",") if _VALID.match(n) and len(n) == 22]
        if wanted and node_id not in wanted:
            nodes = []

    svc = services()
    snapshots = {name: svc.stats.snapshot(name) for name in events} if nodes else {}
    cluster = cluster_info.info(svc.client)
    body: dict[str, Any] = {
        "_nodes": {"total": len(nodes), "successful": len(nodes), "failed": 0},
        "cluster_name": cluster["cluster_name"],
    }
    if include_info:
        values = {"cluster_version": _cluster_version()} if "cluster_version" in infos else {}
        body["info"] = _format({full_path(k): ("info_string", v) for k, v in values.items()},
                               flatten, metadata)
    leaves = {full_path(k): ("timestamped_event_counter", v) for k, v in snapshots.items()}
    if include_all:
        body["all_nodes"] = _format(leaves, flatten, metadata)
    if include_nodes:
        body["nodes"] = {n: _format(leaves, flatten, metadata) for n in nodes}
    return json_response(body)


def _requested(stat_param: str | None) -> tuple[list[str], list[str]]:
    """Event and info stat names asked for (all by default); unknown names are a 400."""
    if not stat_param:
        return list(EVENT_STATS), list(INFO_STATS)
    events, infos, invalid = [], [], []
    for raw in stat_param.split(","):
        name = raw.lower()
        if name in EVENT_STATS:
            events.append(name)
        elif name in INFO_STATS:
            infos.append(name)
        else:
            invalid.append(name)
    if invalid:
        raise BadRequest(_unrecognized(request.path, invalid, set(EVENT_STATS) | set(INFO_STATS)))
    return events, infos


def _unrecognized(path: str, invalid: list[str], candidates: set[str]) -> str:
    """OpenSearch's ``BaseRestHandler.unrecognized`` message, with its "did you mean" hints."""
    parts = []
    for name in invalid:
        scored = sorted(((_similarity(name, c), c) for c in candidates),
                        key=lambda t: (-t[0], t[1]))
        scored = [(score, c) for score, c in scored if score > 0.5]
        text = f"[{name}]"
        if len(scored) == 1:
            text += f" -> did you mean [{scored[0][1]}]?"
        elif scored:
            text += " -> did you mean any of [" + ", ".join(c for _, c in scored) + "]?"
        parts.append(text)
    plural = "s" if len(invalid) > 1 else ""
    return f"request [{path}] contains unrecognized stat{plural}: " + ", ".join(parts)


def _similarity(a: str, b: str) -> float:
    """Lucene's LevenshteinDistance: 1 - edits / longer length."""
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        current = [i]
        for j, cb in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return 1.0 - previous[-1] / max(len(a), len(b), 1)


def _cluster_version() -> str:
    """The lowest version among the cluster's nodes."""
    versions = cluster_info.node_versions(services().client)
    return min(versions, key=lambda v: tuple(int(p) for p in re.findall(r"\d+", v)))


def _format(leaves: dict[str, tuple[str, Any]], flatten: bool, metadata: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path, (stat_type, value) in leaves.items():
        leaf = _leaf(stat_type, value, metadata)
        if flatten:
            out[path] = leaf
            continue
        node = out
        *parents, last = path.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = leaf
    return out


def _leaf(stat_type: str, value: Any, metadata: bool) -> Any:
    if isinstance(value, EventSnapshot):
        if not metadata:
            return value.value
        return {"value": value.value, "stat_type": stat_type,
                "trailing_interval_value": value.trailing_interval_value,
                "minutes_since_last_event": value.minutes_since_last_event}
    return {"value": value, "stat_type": stat_type} if metadata else value
