"""Pass-through under stress and faults: large bodies, the size limit, a cluster that goes away."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import urllib3
from opensearchpy import OpenSearch

from tests.support.processes import FRONTS, Server, free_port
from tests.support.relay import SilentEndpoint, TcpRelay

http = urllib3.PoolManager(retries=False, timeout=300)
MB = 1024 * 1024


def peak_rss(pid: int) -> int:
    """VmHWM: the most resident memory the process has ever had, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def write_bulk_file(path: Path, index: str, size: int) -> int:
    """An NDJSON ``_bulk`` body of about ``size`` bytes; returns the number of documents."""
    filler = "lorem ipsum dolor sit amet " * 20
    n = 0
    with path.open("w") as out:
        written = 0
        while written < size:
            action = json.dumps({"index": {"_index": index}})
            doc = json.dumps({"n": n, "text": filler, "tag": f"t{n % 100}"})
            written += out.write(action + "\n" + doc + "\n")
            n += 1
    return n


@pytest.fixture
def single_worker_server(env: dict[str, str]) -> Iterator[Server]:
    srv = Server(env, workers=1)
    yield srv
    srv.stop()


@pytest.mark.slow
@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_50mb_bulk_streams_through_without_buffering(
    single_worker_server: Server, direct: OpenSearch, index_name: str, tmp_path: Path,
    chunked: bool,
) -> None:
    path = tmp_path / "bulk.ndjson"
    count = write_bulk_file(path, index_name, 50 * MB)
    size = path.stat().st_size
    (pid,) = single_worker_server.worker_pids()
    before = peak_rss(pid)

    with path.open("rb") as body:
        if chunked:
            def chunks() -> Iterator[bytes]:
                while block := body.read(256 * 1024):
                    yield block
            response = http.request(
                "POST", single_worker_server.url + "/_bulk?filter_path=errors,items.*.status",
                body=chunks(), chunked=True,
                headers={"Content-Type": "application/x-ndjson"},
            )
        else:
            response = http.request(
                "POST", single_worker_server.url + "/_bulk?filter_path=errors,items.*.status",
                body=body, headers={"Content-Type": "application/x-ndjson",
                                    "Content-Length": str(size)},
            )
    growth = peak_rss(pid) - before
    assert response.status == 200, response.data[:500]
    answer = json.loads(response.data)
    assert answer["errors"] is False
    assert len(answer["items"]) == count
    direct.indices.refresh(index=index_name)
    assert direct.count(index=index_name)["count"] == count
    # Figure for the issue note; the bound is far below the body size, never near it.
    print(f"\n50 MB bulk ({'chunked' if chunked else 'content-length'}): body {size / MB:.1f} MB,"
          f" worker peak RSS growth {growth / MB:.1f} MB")
    assert growth < size * 0.2, f"worker grew by {growth / MB:.1f} MB for a {size / MB:.0f} MB body"


@pytest.mark.parametrize("front", FRONTS)
def test_body_over_the_limit_is_413(env: dict[str, str], index_name: str, front: str) -> None:
    srv = Server(dict(env, WORKBENCH_MAX_REQUEST_BYTES=str(MB)), workers=1, front=front)
    try:
        big = b'{"index":{}}\n{"a":1}\n' * (2 * MB // 20)
        response = http.request("POST", f"{srv.url}/{index_name}/_bulk", body=big,
                                headers={"Content-Type": "application/x-ndjson"})
        assert response.status == 413
        reason = (f"Request body is larger than the limit of {MB} bytes "
                  "(WORKBENCH_MAX_REQUEST_BYTES)")
        assert json.loads(response.data) == {
            "error": {"root_cause": [{"type": "content_too_long_exception", "reason": reason}],
                      "type": "content_too_long_exception", "reason": reason},
            "status": 413,
        }

        def chunks() -> Iterator[bytes]:
            for i in range(0, len(big), 64 * 1024):
                yield big[i:i + 64 * 1024]
        chunked = http.request("POST", f"{srv.url}/{index_name}/_bulk", body=chunks(),
                               chunked=True, headers={"Content-Type": "application/x-ndjson"})
        assert chunked.status == 413
        assert json.loads(chunked.data)["error"]["type"] == "content_too_long_exception"

        small = b'{"index":{}}\n{"a":1}\n' * 100
        ok = http.request("POST", f"{srv.url}/{index_name}/_bulk?refresh=true", body=small,
                          headers={"Content-Type": "application/x-ndjson"})
        assert ok.status == 200
        assert json.loads(ok.data)["errors"] is False
    finally:
        srv.stop()


@pytest.mark.parametrize("front", FRONTS)
def test_unreachable_cluster_is_503_then_recovers(env: dict[str, str], opensearch_url: str,
                                                  front: str) -> None:
    port = free_port()
    secret = "s3cr3t-pw"
    cluster = urlsplit(opensearch_url)
    srv = Server(dict(env, OPENSEARCH_URL=f"http://admin:{secret}@127.0.0.1:{port}"),
                 workers=1, wait_cluster=False, front=front)
    relay = TcpRelay(port, (cluster.hostname or "127.0.0.1", cluster.port or 9200))
    try:
        down = http.request("GET", srv.url + "/_cluster/health")
        assert down.status == 503
        error = json.loads(down.data)
        assert error == {
            "error": {
                "root_cause": [{"type": "cluster_unavailable_exception",
                                "reason": error["error"]["reason"]}],
                "type": "cluster_unavailable_exception",
                "reason": error["error"]["reason"],
            },
            "status": 503,
        }
        # HAProxy does not tell the cause of a failed connection; the Python proxy does.
        cause = "connection failed" if front == "haproxy" else "connection refused"
        assert error["error"]["reason"] == (
            f"OpenSearch cluster at http://127.0.0.1:{port} is unreachable: {cause}"
        )

        relay.start()  # the cluster comes back
        up = http.request("GET", srv.url + "/_cluster/health")
        assert up.status == 200
        assert json.loads(up.data)["status"] in ("green", "yellow")

        relay.stop()  # and goes away again, with connections in the pool
        time.sleep(0.2)
        again = http.request("GET", srv.url + "/_cluster/health")
        assert again.status == 503
    finally:
        relay.stop()
        srv.stop()
    assert secret not in srv.log()


@pytest.mark.parametrize("front", FRONTS)
def test_frozen_cluster_is_504_within_the_timeout(env: dict[str, str], front: str) -> None:
    """A node that accepts connections and never answers: an SRW route (opensearch-py) and a
    pass-through GET (Python proxy or HAProxy) both answer 504 after about OPENSEARCH_TIMEOUT."""
    frozen = SilentEndpoint()
    limit = 2.0
    srv = Server(dict(env, OPENSEARCH_URL=f"http://127.0.0.1:{frozen.port}",
                      OPENSEARCH_TIMEOUT=str(limit)), workers=1, wait_cluster=False, front=front)
    try:
        reason = (f"OpenSearch cluster at http://127.0.0.1:{frozen.port} did not answer within "
                  f"{limit:g}s")
        for path in ("/_plugins/_search_relevance/query_sets", "/_cluster/health",
                     "/some-index/_search?q=a"):
            started = time.monotonic()
            answer = http.request("GET", srv.url + path)
            took = time.monotonic() - started
            print(f"\n{front} GET {path}: {answer.status} in {took:.2f}s")
            assert answer.status == 504, answer.data[:500]
            assert json.loads(answer.data) == {
                "error": {"root_cause": [{"type": "timeout_exception", "reason": reason}],
                          "type": "timeout_exception", "reason": reason},
                "status": 504,
            }
            assert limit - 0.1 <= took < limit + 3, f"{path} took {took:.1f}s"
    finally:
        srv.stop()
        frozen.stop()


@pytest.mark.parametrize("front", FRONTS)
def test_server_log_has_no_credentials(env: dict[str, str], opensearch_url: str,
                                       front: str) -> None:
    cluster = urlsplit(opensearch_url)
    secret = "another-s3cret"
    url = f"http://user:{secret}@{cluster.hostname}:{cluster.port}"
    srv = Server(dict(env, OPENSEARCH_URL=url, OPENSEARCH_PASSWORD=secret), workers=1,
                 front=front)
    try:
        assert http.request("GET", srv.url + "/").status == 200
        assert http.request("GET", srv.url + "/_plugins/_search_relevance/nope").status == 404
    finally:
        srv.stop()
    token = base64.b64encode(f"user:{secret}".encode()).decode()
    assert secret not in srv.log() and token not in srv.log()
