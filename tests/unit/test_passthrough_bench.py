"""The pure pieces of the pass-through benchmark (workbench/bench/passthrough.py, wrk.py and
passthrough_ways.py): wrk's report parsed from fixed samples, the Lua script's quoting, which
processes make a way of serving, and the ratios and medians of the results."""

from __future__ import annotations

import pytest

from workbench.bench import wrk
from workbench.bench.passthrough import bulk_index, over, results_of
from workbench.bench.passthrough_ways import WAYS, Way, mismatch
from workbench.bench.wrk import Load, WrkError

# wrk 4.1.0 (Debian), `wrk -t1 -c1 -d1s --latency URL`, verbatim.
SAMPLE = """\
Running 1s test @ http://127.0.0.1:9200/
  1 threads and 1 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   187.70us    1.20ms  17.71ms   97.90%
    Req/Sec    27.99k    11.44k   38.82k    81.82%
  Latency Distribution
     50%   28.00us
     75%   44.00us
     90%  109.00us
     99%    4.46ms
  30552 requests in 1.10s, 20.54MB read
Requests/sec:  27771.72
Transfer/sec:     18.67MB
"""

# The shape of a run with failures: latencies in seconds (padded as wrk pads them), socket errors
# and non-2xx answers.
FAILING = """\
Running 2s test @ http://127.0.0.1:9400
  2 threads and 16 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.21s   400.00ms   1.90s    60.00%
    Req/Sec     5.00      2.00     9.00     70.00%
  Latency Distribution
     50%    1.20s{pad}
     75%    1.50s{pad}
     90%    1.80s{pad}
     99%    1.90s{pad}
  20 requests in 2.00s, 5.00KB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 4
Requests/sec:     10.00
Transfer/sec:      2.49KB
""".format(pad=" ")


def test_parse_reads_throughput_percentiles_and_no_errors() -> None:
    load = wrk.parse(SAMPLE)
    assert load.requests == 30552
    assert load.rps == pytest.approx(27771.72)
    assert load.seconds == pytest.approx(30552 / 27771.72)  # exact, not the rounded 1.10s
    assert load.p50_ms == pytest.approx(0.028)
    assert load.p99_ms == pytest.approx(4.46)
    assert load.errors == 0


def test_parse_counts_socket_errors_and_non_2xx_and_reads_seconds() -> None:
    load = wrk.parse(FAILING)
    assert (load.requests, load.rps) == (20, 10.0)
    assert load.p50_ms == pytest.approx(1200.0)
    assert load.p99_ms == pytest.approx(1900.0)
    assert load.errors == 2 + 1 + 4


def test_parse_refuses_a_report_without_the_latency_distribution() -> None:
    without = SAMPLE.split("  Latency Distribution")[0] + SAMPLE.split("99%    4.46ms\n")[1]
    with pytest.raises(WrkError, match="unexpected wrk output"):
        wrk.parse(without)


def test_the_latency_distribution_is_not_read_from_the_thread_stats() -> None:
    # "Latency 187.70us" above the table must not stand in for a missing percentile line
    with pytest.raises(WrkError):
        wrk.parse(SAMPLE.replace("     99%    4.46ms\n", ""))


def test_command_asks_for_the_latency_distribution() -> None:
    cmd = wrk.command("/usr/bin/wrk", "http://h:1", "s.lua", 8.0, 16, 2)
    assert cmd == ["/usr/bin/wrk", "-t2", "-c16", "-d8s", "--latency", "--timeout", "30s",
                   "-s", "s.lua", "http://h:1"]
    assert wrk.command("wrk", "http://h:1", "s.lua", 3.0, 1, 2)[1:3] == ["-t1", "-c1"]


def test_lua_strings_cannot_be_closed_by_the_body() -> None:
    assert wrk.lua_string('{"a": 1}') == '[====[{"a": 1}]====]'
    tricky = 'x ]====] y ]=====] z'
    quoted = wrk.lua_string(tricky)
    level = quoted.index("[", 1)  # the opening bracket's level
    closing = "]" + quoted[1:level] + "]"
    assert quoted.endswith(closing) and closing not in tricky


def test_lua_script_holds_every_body_path_and_content_type() -> None:
    script = wrk.lua_script("/i/_bulk", "application/x-ndjson", ["one\n", "two\n"])
    assert "[====[one\n]====],\n[====[two\n]====]" in script
    assert "local path = [====[/i/_bulk]====]" in script
    assert "%%" not in script and "% #requests" in script  # the template's %% is Lua's %


def test_bulk_indices_are_named_after_their_side() -> None:
    assert bulk_index("door + nginx") == "bench-passthrough-bulk-door-nginx"
    assert bulk_index("direct") == "bench-passthrough-bulk-direct"


def way(name: str) -> Way:
    return next(w for w in WAYS if w.name == name)


def test_a_way_is_served_only_by_its_own_processes() -> None:
    gunicorn = ["/v/bin/python -m workbench.cli serve"]
    haproxy = [*gunicorn, "/v/bin/python -m workbench.cli serve",
               "/usr/sbin/haproxy -db -f /tmp/w/haproxy.cfg"]
    door_nginx = [*gunicorn, "nginx: master process /usr/sbin/nginx -e stderr",
                  "nginx: worker process",
                  "/v/bin/python -m workbench.serving.door --fd 3 --upstream /tmp/f.sock"]
    assert mismatch(way("haproxy"), haproxy) is None
    assert mismatch(way("gunicorn"), gunicorn) is None
    assert mismatch(way("door + nginx"), door_nginx) is None
    # WORKBENCH_FRONT=nginx read as HAProxy's old name: not door + nginx
    assert mismatch(way("door + nginx"), haproxy) == "no nginx process"
    assert mismatch(way("gunicorn"), haproxy) == "a haproxy process runs"
    assert mismatch(way("haproxy"), door_nginx) == "no haproxy process"


def loads(*rps: float, p50: float = 1.0) -> list[Load]:
    return [Load(requests=int(r * 8), seconds=8.0, rps=r, p50_ms=p50, p99_ms=p50 * 3,
                 errors=0, generator_cpu=0.8) for r in rps]


def test_results_are_medians_of_the_rounds_with_every_round_kept() -> None:
    loaded = {("_search", "direct"): loads(1000, 1200, 1100, p50=2.0),
              ("_search", "haproxy"): loads(900, 1000, 990, p50=2.5)}
    single = {("_search", "direct"): loads(500, p50=0.5) * 3,
              ("_search", "haproxy"): loads(400, p50=0.6) * 3}
    rows = results_of("_search", "haproxy", loaded, single, {"served by": "HAProxy"})
    names = [r.name for r in rows]
    assert names == ["_search via haproxy (16 connections) throughput",
                     "_search via haproxy (16 connections) latency p50",
                     "_search via haproxy (16 connections) latency p99",
                     "_search via haproxy (1 connection) latency p50"]
    throughput = rows[0]
    assert (throughput.measured, throughput.baseline) == (990, 1100)
    assert throughput.target == 0.85 and throughput.met  # 0.9
    assert throughput.details["req/s per round via"] == [900, 1000, 990]
    assert throughput.details["ratio per round"] == [0.9, 0.833, 0.9]
    assert throughput.details["served by"] == "HAProxy"
    assert rows[1].details["added ms"] == 0.5
    assert rows[3].measured == pytest.approx(0.6)
    assert rows[3].details["req/s via/direct"] == "400/500"


def test_only_search_via_haproxy_has_the_direct_target() -> None:
    loaded = {(op, side): loads(100, 100, 100) for op in ("_search", "_bulk")
              for side in ("direct", "gunicorn", "haproxy")}
    assert results_of("_search", "gunicorn", loaded, loaded, {})[0].target is None
    assert results_of("_bulk", "haproxy", loaded, loaded, {})[0].target is None


def test_haproxy_over_door_nginx_needs_both_and_targets_search() -> None:
    loaded = {("_search", "haproxy"): loads(1300, 1400, 1500),
              ("_search", "door + nginx"): loads(1000, 1000, 1100),
              ("_bulk", "haproxy"): loads(10, 10, 10),
              ("_bulk", "door + nginx"): loads(9, 9, 9)}
    (search,) = over("_search", loaded)
    assert (search.measured, search.baseline, search.target) == (1400, 1000, 1.3)
    assert search.met and search.details["ratio per round"] == [1.3, 1.4, 1.364]
    (bulk,) = over("_bulk", loaded)
    assert bulk.target is None
    del loaded[("_search", "door + nginx")]
    assert over("_search", loaded) == []


def test_haproxy_over_the_bare_proxy_has_no_target() -> None:
    loaded = {("_search", "haproxy"): loads(900, 950, 1000),
              ("_search", "door + nginx"): loads(600, 600, 600),
              ("_search", "bare haproxy"): loads(1000, 1000, 1000)}
    to_door, to_bare = over("_search", loaded)
    assert to_door.name.endswith("via haproxy vs via door + nginx (16 connections) throughput")
    assert to_bare.name == "_search via haproxy vs via bare haproxy (16 connections) throughput"
    assert (to_bare.measured, to_bare.baseline, to_bare.target) == (950, 1000, None)
    assert to_bare.details["ratio per round"] == [0.9, 0.95, 1.0]
