"""The caller of a workbench-served route: bound for the request, authenticated by the cluster.

Every route the workbench answers itself (the SRW routes, the intercepted cluster settings, UBI
initialisation and model listing) first binds the caller's identity, so every cluster call made
while answering it is made as the caller (``store.identity``), then asks the cluster who the
caller is. On a secured cluster bad or missing credentials get the cluster's own 401, before the
workbench looks at anything else; without the security plugin every caller is accepted, as the
cluster itself would.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from flask import Blueprint, Response, abort, g, request

from workbench.api import services
from workbench.store import identity
from workbench.store.indices import SEARCH_CONFIG_INDEX
from workbench.store.repository import Repository


def bind_and_authenticate() -> None:
    """``before_request``: act as the caller; refuse what the cluster refuses."""
    if "identity_token" in g:
        return  # nested blueprints: bound once
    svc = services()
    who = identity.caller_identity(request.headers.items(), svc.config)
    g.identity_token = identity.bind(who)
    try:
        g.caller = identity.authenticate(svc.upstream, who)
    except identity.Refused as exc:
        abort(Response(exc.body, status=exc.status, headers=list(exc.headers)))


def unbind(_: BaseException | None = None) -> None:
    """``teardown_request``: the thread serves the next request with no identity."""
    token = g.pop("identity_token", None)
    if token is not None:
        identity.unbind(token)


def created_by() -> dict[str, str]:
    """``{"createdBy": user}`` for an entity created on a secured cluster, else nothing."""
    caller: identity.Caller | None = g.get("caller")
    return {"createdBy": caller.user} if caller is not None and caller.user else {}


def user_name() -> str:
    """The caller's user name on a secured cluster, else empty (every caller is the same)."""
    caller: identity.Caller | None = g.get("caller")
    return caller.user or "" if caller is not None else ""


def secured() -> bool:
    caller: identity.Caller | None = g.get("caller")
    return caller is not None and caller.secured


def refuse_unless_searchable(config_ids: Iterable[Any], indices: Iterable[str] = ()) -> None:
    """Before a job is stored: on a secured cluster the caller must be able to search every
    index the job will touch (the search configurations' indices and ``indices``), because the
    job runs later as the service identity. A refusal is the cluster's own 403; nothing is
    stored."""
    if not secured():
        return
    client = services().client
    repo = Repository(client, SEARCH_CONFIG_INDEX)
    wanted = set(indices)
    for config_id in config_ids:
        config = repo.get_source(str(config_id)) if isinstance(config_id, str) else None
        if config and isinstance(config.get("index"), str):
            wanted.add(config["index"])
    identity.check_can_search(client, sorted(wanted))


def install(bp: Blueprint) -> None:
    """Bind and authenticate the caller on every route of ``bp``."""
    bp.before_request(bind_and_authenticate)
    bp.teardown_request(unbind)
