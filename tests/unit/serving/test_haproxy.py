"""The HAProxy front's configuration: the template's rules, rendered for each kind of cluster."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from workbench.config import Config
from workbench.serving import haproxy

PREFIXES = ("/_cluster/settings", "/_plugins/_search_relevance")


def rendered(tmp_path: Path, **env: str) -> str:
    config = Config.from_env({"WORKBENCH_PORT": "9400", **env})
    return haproxy.write(config, 12345, PREFIXES, tmp_path).read_text()


def test_the_template_ships_with_the_package() -> None:
    pyproject = (Path(__file__).resolve().parents[3] / "pyproject.toml").read_text()
    assert '"serving/haproxy.cfg.j2"' in pyproject
    assert (Path(haproxy.__file__).parent / haproxy.TEMPLATE).is_file()


def test_routes_and_request_line_rule(tmp_path: Path) -> None:
    text = rendered(tmp_path, OPENSEARCH_URL="http://127.0.0.1:9200")
    assert "option accept-invalid-http-request" in text
    # The slash is added before the Host rewrite (which would take "_cluster" for an authority).
    assert text.index("http-request set-uri /%[url]") < text.index("set-header Host 127.0.0.1:9200")
    assert "-m beg /_cluster/settings /_plugins/_search_relevance\n" in text
    assert "use_backend workbench_api if app_path || !routed || !fast_method || chunked\n" in text
    assert "anonymous" not in text
    assert "server api 127.0.0.1:12345" in text
    assert "timeout server 120000ms" in text  # OPENSEARCH_TIMEOUT's default, 120 s
    assert " ssl " not in text


def test_anonymous_callers_go_to_the_app_only_where_credentials_are_lent(tmp_path: Path) -> None:
    text = rendered(tmp_path, OPENSEARCH_URL="http://u:p@127.0.0.1:9200",
                    WORKBENCH_ANONYMOUS_AS_SERVICE="true")
    assert "acl anonymous req.fhdr_cnt(authorization) eq 0" in text
    assert "|| chunked || anonymous\n" in text
    assert "u:p" not in text and "dTpw" not in text  # no credentials in the front


def test_tls_verification(tmp_path: Path) -> None:
    text = rendered(tmp_path, OPENSEARCH_URL="https://search.example:9443/os",
                    OPENSEARCH_CA_CERTS="/etc/ca.pem")
    assert ("server cluster search.example:9443 ssl sni str(search.example) verify required "
            "ca-file /etc/ca.pem verifyhost search.example") in text
    assert "http-request set-path /os%[path]" in text
    system = rendered(tmp_path, OPENSEARCH_URL="https://search.example")
    assert "search.example:443 ssl sni str(search.example) verify required ca-file @system-ca" \
        in system
    off = rendered(tmp_path, OPENSEARCH_URL="https://10.0.0.1:9200",
                   OPENSEARCH_VERIFY_CERTS="false")
    assert "server cluster 10.0.0.1:9200 ssl verify none" in off  # no SNI for an address


def test_ipv6_addresses(tmp_path: Path) -> None:
    text = rendered(tmp_path, OPENSEARCH_URL="http://[::1]:9200", WORKBENCH_HOST="::")
    assert "bind ipv6@:::9400" in text
    assert "server cluster ipv6@::1:9200" in text
    assert "set-header Host [::1]:9200" in text


def test_error_files_are_the_workbench_envelopes(tmp_path: Path) -> None:
    rendered(tmp_path, OPENSEARCH_URL="http://127.0.0.1:9200", OPENSEARCH_TIMEOUT="2.5",
             WORKBENCH_MAX_REQUEST_BYTES="1000")
    expected = {
        "too_large.http": (413, "content_too_long_exception", "Request body is larger than the "
                           "limit of 1000 bytes (WORKBENCH_MAX_REQUEST_BYTES)"),
        "unreachable.http": (503, "cluster_unavailable_exception", "OpenSearch cluster at "
                             "http://127.0.0.1:9200 is unreachable: connection failed"),
        "timed_out.http": (504, "timeout_exception", "OpenSearch cluster at "
                           "http://127.0.0.1:9200 did not answer within 2.5s"),
        "api_down.http": (503, "workbench_unavailable_exception",
                          "the workbench API is not answering"),
    }
    for name, (status, kind, reason) in expected.items():
        head, _, body = (tmp_path / "errors" / name).read_bytes().partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 %d " % status)
        assert b"\r\nContent-Length: %d\r\n" % len(body) in head + b"\r\n"
        assert json.loads(body) == {"error": {"root_cause": [{"type": kind, "reason": reason}],
                                              "type": kind, "reason": reason}, "status": status}


@pytest.mark.skipif(shutil.which("haproxy") is None and not Path("/usr/sbin/haproxy").exists(),
                    reason="haproxy is not installed")
def test_haproxy_accepts_the_configuration(tmp_path: Path) -> None:
    rendered(tmp_path, OPENSEARCH_URL="https://u:p@localhost:9443/os",
             WORKBENCH_ANONYMOUS_AS_SERVICE="true", OPENSEARCH_VERIFY_CERTS="false")
    binary = shutil.which("haproxy") or "/usr/sbin/haproxy"
    check = subprocess.run([binary, "-c", "-f", str(tmp_path / "haproxy.cfg")],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.parametrize(("cpus", "expected"), [(1, 1), (2, 1), (3, 1), (8, 4), (64, 32)])
def test_threads_take_half_the_cores(cpus: int, expected: int) -> None:
    assert haproxy.threads(cpus) == expected


def test_the_configuration_names_its_threads(tmp_path: Path) -> None:
    text = rendered(tmp_path, OPENSEARCH_URL="http://127.0.0.1:9200")
    assert f"\n    nbthread {haproxy.threads()}\n" in text


def test_one_server_per_node_with_health_checks(tmp_path: Path) -> None:
    text = rendered(tmp_path, OPENSEARCH_URL="https://u:p@os-a:9200,https://u:p@os-b:9201",
                    OPENSEARCH_CA_CERTS="/etc/ca.pem")
    for name, host, port in (("node1", "os-a", 9200), ("node2", "os-b", 9201)):
        assert (f"    server {name} {host}:{port} ssl sni str({host}) verify required ca-file "
                f"/etc/ca.pem verifyhost {host} check inter 1s fall 2 rise 2 observe layer4 "
                "error-limit 1 on-error mark-down pool-purge-delay 50s\n") in text
    for rule in ("balance roundrobin", "option httpchk", "http-check send meth GET uri /",
                 "http-check expect rstatus ^[1-4]", "retry-on conn-failure empty-response",
                 "http-request disable-l7-retry unless reads",
                 "http-request wait-for-body time 60s if reads", "retries 3",
                 "option redispatch 1"):
        assert f"\n    {rule}\n" in text
    assert "set-header Host os-a:9200" in text and "u:p" not in text
    (tmp_path / "errors" / "unreachable.http").read_bytes().index(
        b"OpenSearch cluster at https://os-a:9200, https://os-b:9201 is unreachable")
    # one node: no checks (a restarted node is tried at once), as before
    single = rendered(tmp_path, OPENSEARCH_URL="http://127.0.0.1:9200")
    assert "option httpchk" not in single and " check " not in single


@pytest.mark.skipif(shutil.which("haproxy") is None and not Path("/usr/sbin/haproxy").exists(),
                    reason="haproxy is not installed")
def test_haproxy_accepts_a_configuration_of_three_nodes(tmp_path: Path) -> None:
    rendered(tmp_path, OPENSEARCH_URL="http://127.0.0.1:9501,http://127.0.0.1:9502,"
                                      "http://127.0.0.1:9503")
    binary = shutil.which("haproxy") or "/usr/sbin/haproxy"
    check = subprocess.run([binary, "-c", "-f", str(tmp_path / "haproxy.cfg")],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
