"""A small HTTP client of a running workbench, for the command line.

The command line talks to the server over HTTP (never to the cluster or Redis directly), so it works
wherever the API answers, including in front of a secured cluster: credentials come from
``--user/--password``, ``WORKBENCH_USER``/``WORKBENCH_PASSWORD`` or a ready
``WORKBENCH_AUTHORIZATION`` header value, and are never printed.
"""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote, urlencode

import urllib3

SRW = "/_plugins/_search_relevance"
DEFAULT_URL = "http://127.0.0.1:9400"
EVALUATIONS = "search-relevance-evaluation-result"
RUNNING = ("PROCESSING", "RETRYING")


class ClientError(Exception):
    """The server could not be reached, or answered with an error (the message says which)."""


def authorization(user: str | None, password: str | None,
                  env: Mapping[str, str] | None = None) -> str | None:
    """The Authorization header value: explicit user/password, else the environment's."""
    env = os.environ if env is None else env
    user = user or env.get("WORKBENCH_USER")
    password = password if password is not None else env.get("WORKBENCH_PASSWORD")
    if user:
        token = base64.b64encode(f"{user}:{password or ''}".encode()).decode()
        return f"Basic {token}"
    return env.get("WORKBENCH_AUTHORIZATION") or None


class WorkbenchClient:
    """JSON over HTTP to the workbench's SRW routes and its pass-through."""

    def __init__(self, url: str | None = None, auth: str | None = None,
                 timeout: float = 120.0, verify: bool = True) -> None:
        self.url = (url or os.environ.get("WORKBENCH_URL") or DEFAULT_URL).rstrip("/")
        self._headers = {"Content-Type": "application/json"}
        if auth:
            self._headers["Authorization"] = auth
        self._http = urllib3.PoolManager(
            timeout=timeout,
            retries=urllib3.Retry(connect=2, read=0, redirect=0, backoff_factor=0.5),
            cert_reqs="CERT_REQUIRED" if verify else "CERT_NONE")

    def call(self, method: str, path: str, body: Any = None,
             params: Mapping[str, Any] | None = None, ok: tuple[int, ...] = (200,),
             ndjson: str | None = None) -> Any:
        """One request; the JSON answer, or a ClientError naming the route and the reason.
        ``ndjson``: a bulk body sent as it is (instead of ``body`` as JSON)."""
        target = self.url + path + ("?" + urlencode(params) if params else "")
        headers = self._headers
        data = None if body is None else json.dumps(body).encode()
        if ndjson is not None:
            headers = dict(headers, **{"Content-Type": "application/x-ndjson"})
            data = ndjson.encode()
        try:
            response = self._http.request(method, target, body=data, headers=headers)
        except urllib3.exceptions.HTTPError as exc:
            raise ClientError(f"cannot reach the workbench at {self.url}: "
                              f"{type(exc).__name__}: {exc}") from None
        text = response.data.decode("utf-8", "replace")
        if response.status not in ok:
            raise ClientError(f"{method} {path} answered {response.status}: {_reason(text)}")
        try:
            return json.loads(text) if text else None
        except ValueError:
            return text

    def bulk(self, index: str, ndjson: str) -> dict[str, Any]:
        """``POST /{index}/_bulk`` through the pass-through (NDJSON body); its answer."""
        answer: dict[str, Any] = self.call("POST", f"/{quote(index, safe='')}/_bulk",
                                           ndjson=ndjson)
        return answer

    def srw(self, method: str, path: str, body: Any = None, **kwargs: Any) -> Any:
        return self.call(method, SRW + path, body, **kwargs)

    # entities -------------------------------------------------------------------------------

    def get(self, collection: str, entity_id: str) -> dict[str, Any]:
        """One stored entity's ``_source`` (``collection`` as in the route: ``experiments``...)."""
        answer = self.srw("GET", f"/{collection}/{quote(entity_id, safe='')}")
        hits = (answer or {}).get("hits", {}).get("hits", [])
        if not hits:
            raise ClientError(f"{collection[:-1].replace('_', ' ')} {entity_id} not found")
        return hits[0]["_source"]

    def wait(self, collection: str, entity_id: str, on_progress: Callable[[int, int], None],
             timeout: float = 3600.0, interval: float = 0.5) -> dict[str, Any]:
        """Poll a judgment or experiment until it is no longer running, reporting progress.

        ``on_progress(done, total)`` is called on every poll that shows progress (experiments
        carry ``progress``, judgments ``metadata.progress``). Returns the final document.
        """
        deadline = time.monotonic() + timeout
        while True:
            doc = self.get(collection, entity_id)
            progress = doc.get("progress") or (doc.get("metadata") or {}).get("progress") or {}
            if progress.get("total"):
                on_progress(int(progress.get("done", 0)), int(progress["total"]))
            if doc.get("status") not in RUNNING:
                return doc
            if time.monotonic() > deadline:
                raise ClientError(f"{collection[:-1]} {entity_id} still {doc.get('status')} "
                                  f"after {timeout:.0f} s")
            time.sleep(interval)

    def evaluations(self, experiment_id: str) -> list[dict[str, Any]]:
        """Every evaluation result of an experiment (paged with search_after, by id)."""
        out: list[dict[str, Any]] = []
        after: list[Any] | None = None
        # Best effort: a user allowed to search but not to refresh still reads what is visible.
        self.call("POST", f"/{EVALUATIONS}/_refresh", ok=(200, 403, 404))
        while True:
            body: dict[str, Any] = {"query": {"term": {"experimentId": experiment_id}},
                                    "size": 5000, "sort": [{"id": "asc"}]}
            if after:
                body["search_after"] = after
            answer = self.call("POST", f"/{EVALUATIONS}/_search", body, ok=(200, 404))
            hits = ((answer or {}).get("hits") or {}).get("hits") or []
            out.extend(h["_source"] for h in hits)
            if len(hits) < 5000:
                return out
            after = hits[-1]["sort"]


def _reason(text: str) -> str:
    """The reason of an OpenSearch error envelope, or the (shortened) text of the answer."""
    try:
        body = json.loads(text)
        error = body.get("error")
        if isinstance(error, dict):
            return str(error.get("reason") or error.get("type") or error)
        if error:
            return str(error)
    except (ValueError, AttributeError):
        pass
    return text.strip()[:500] or "(empty answer)"
