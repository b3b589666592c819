"""Cluster-level paths the workbench answers in part or in full:

* ``_cluster/settings``: ``plugins.search_relevance.*`` keys are the workbench's own (the cluster
  would refuse them; schemas/cluster_settings.py checks them); every other key still goes to the
  cluster, and the answers are merged.
* ``_plugins/ubi/initialize``: creates ``ubi_queries``/``ubi_events`` when the cluster has no UBI
  plugin, so sampling and click models work with any cluster.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from flask import Blueprint, Response, request

from workbench.api import caller, check_output_flags, json_body, json_response, services
from workbench.api.proxy import forward
from workbench.schemas.body import load
from workbench.schemas.cluster_settings import (
    DEFINITIONS,
    PREFIX,
    SCOPES,
    ClusterSettingsSchema,
    ours,
)
from workbench.store import generation, plugins
from workbench.store.bootstrap import ensure_index, load_spec

bp = Blueprint("cluster", __name__)
bp.before_request(check_output_flags)  # before the caller is authenticated, as OpenSearch
caller.install(bp)

def nest(flat: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in flat.items():
        node = out
        *parents, last = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return out


def merge(into: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = value
    return into


def _query(drop: tuple[str, ...] = ()) -> str:
    pairs = [(k, v) for k, v in request.args.items(multi=True) if k not in drop]
    return ("?" + urlencode(pairs)) if pairs else ""


def _cluster_call(method: str, body: dict[str, Any] | None,
                  drop: tuple[str, ...] = ()) -> tuple[int, Any]:
    raw = json.dumps(body).encode() if body is not None else None
    headers = [(k, v) for k, v in request.headers.items()
               if k.lower() in ("authorization", "securitytenant", "x-opaque-id")]
    headers.append(("Content-Type", "application/json"))
    answer = services().upstream.request(method, "/_cluster/settings" + _query(drop), headers,
                                         raw, len(raw) if raw is not None else None)
    data = answer.read()
    answer.release_conn()
    return answer.status, json.loads(data) if data else {}


@bp.put("/_cluster/settings")
def put_cluster_settings() -> Response:
    loaded = load(ClusterSettingsSchema(), json_body() or {})
    changes = loaded["changes"]
    if not any(changes.values()):
        return forward(request, body_bytes=request.get_data())
    theirs = {scope: {k: v for k, v in loaded[scope].items() if not ours(k)}
              for scope in SCOPES}

    svc = services()
    if any(k.endswith(("stats_enabled", "*")) for scope in SCOPES for k in changes[scope]):
        svc.redis.ping()  # switching stats off resets the counters: Redis down is a 503 first
    answer: dict[str, Any] = {"acknowledged": True, "persistent": {}, "transient": {}}
    if any(theirs.values()):
        status, answer = _cluster_call("PUT", {s: nest(theirs[s]) for s in SCOPES if theirs[s]},
                                       drop=("filter_path", "pretty"))
        if status >= 300:
            return json_response(answer, status)

    before, after = svc.settings.apply(changes["persistent"], changes["transient"])
    generation.bump(svc.cache_redis)  # every process reads the settings again
    if before.value("stats_enabled") and not after.value("stats_enabled"):
        svc.stats.reset()

    flat_out = request.args.get("flat_settings") == "true"
    for scope in SCOPES:
        applied = {k: v for k, v in changes[scope].items() if v is not None}
        section = answer.setdefault(scope, {})
        merge(section, applied if flat_out else nest(applied))
    return json_response(answer)


@bp.get("/_cluster/settings")
def get_cluster_settings() -> Response:
    status, answer = _cluster_call("GET", None, drop=("filter_path", "pretty"))
    if status >= 300:
        return json_response(answer, status)
    stored = services().settings.load()
    flat_out = request.args.get("flat_settings") == "true"
    explicit = {"persistent": stored.persistent, "transient": stored.transient}
    for scope in SCOPES:
        section = answer.setdefault(scope, {})
        merge(section, dict(explicit[scope]) if flat_out else nest(explicit[scope]))
    if request.args.get("include_defaults") == "true":
        defaults = {PREFIX + key: d.default for key, d in DEFINITIONS.items()
                    if PREFIX + key not in stored.persistent
                    and PREFIX + key not in stored.transient}
        merge(answer.setdefault("defaults", {}), defaults if flat_out else nest(defaults))
    return json_response(answer)


UBI_INITIALIZED = '{"message": "UBI indexes created."}'


@bp.post("/_plugins/ubi/initialize")
def ubi_initialize() -> Response:
    if plugins.has(services().client, "opensearch-ubi", "ubi"):
        return forward(request)
    svc = services()
    for name in ("ubi_events", "ubi_queries"):
        ensure_index(svc.client, load_spec(svc.config.index_mappings_dir, f"ubi/{name}.json"))
    # The UBI plugin's answer, byte for byte: a JSON text sent as text/plain, the same whether
    # the indices were created or were there already.
    return Response(UBI_INITIALIZED, status=200, content_type="text/plain; charset=UTF-8")
