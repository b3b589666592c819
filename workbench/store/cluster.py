"""What the cluster says about itself (``GET /`` and the nodes' versions), for the stats API."""

from __future__ import annotations

from typing import Any

from opensearchpy import OpenSearch


def info(client: OpenSearch) -> dict[str, Any]:
    """The cluster's ``GET /`` answer (``cluster_name``, ``version`` ...)."""
    answer: dict[str, Any] = client.info()
    return answer


def node_versions(client: OpenSearch) -> list[str]:
    """The version of every node of the cluster (only that is asked for, ``filter_path``)."""
    answer = client.nodes.info(params={"filter_path": "nodes.*.version"})
    return [n["version"] for n in answer.get("nodes", {}).values()]
