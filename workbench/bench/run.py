"""Run the benchmarks and write ``report.md`` and ``report.json``.

    workbench bench [--only ubi,llm,llama,pointwise,passthrough,metrics,redaction,scale,memory,
                           ab_search,ab_results,coldstart,monitors,holes,remote]
                    [--quick] [--out DIR]
                    [--generators reference,llm] [--llm-url URL] [--llm-model NAME]
                    [--llm-queries N] [--llm-pools low|single|all] [--fills reference,llm]
                    [--data DIR] [--opensearch-url URL] [--redis-url URL]
                    [--workbench-url URL]

A bare ``workbench bench`` runs every benchmark but the opt-in ones (``OPT_IN``: ``holes``,
which takes several minutes of LLM calls); ``--only holes`` runs it.

The benchmarks are part of the installed package, so they measure what is deployed. Services
come from ``--opensearch-url``/``--redis-url``, else OPENSEARCH_URL / REDIS_URL; in a source
checkout with neither they are started as for the tests. With ``--workbench-url`` a benchmark
that can measures that running workbench instead of starting its own ``workbench serve`` and
``workbench worker``; those that need processes of their own with particular settings
(``OWN_PROCESSES``) are skipped, with the reason in the report.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from pathlib import Path

from workbench.bench.common import Bench, Result, machine, previous_results, write_report
from workbench.bench.paths import output

BENCHMARKS = ("metrics", "redaction", "passthrough", "pointwise", "llm", "llama", "ubi",
              "scale", "memory", "ab_search", "ab_results", "coldstart", "monitors", "holes",
              "remote")
#: run only when named in ``--only`` (they take minutes)
OPT_IN = ("holes",)
#: benchmarks that start workbench processes of their own with particular settings, so they
#: cannot measure a deployed workbench (``--workbench-url``): why, as the report says it
OWN_PROCESSES = {
    "llm": "its worker calls the stand-in LLM server of fixed latency, given in WORKBENCH_MODELS",
    "llama": "its server and worker call llama.cpp, given in WORKBENCH_MODELS, one job at a time",
    "scale": "it starts 1, 2 and 4 workers of its own against the stand-in LLM server",
    "memory": "it measures the memory of API processes it starts (recycling on and off)",
    "ab_results": "it measures the memory of an API process it starts on its own impressions "
                  "index (WORKBENCH_AB_QUERIES_INDEX)",
    "coldstart": "its LLM generator runs on a model given in WORKBENCH_MODELS to its own "
                 "server and worker",
    "holes": "its LLM fill runs on a model given in WORKBENCH_MODELS to its own server and "
             "worker",
    "remote": "its server and worker need WORKBENCH_REMOTE_ENDPOINTS trusting this machine's "
              "Solr",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="workbench bench")
    parser.add_argument("--only", help="comma-separated subset of " + ", ".join(BENCHMARKS))
    parser.add_argument("--quick", action="store_true",
                        help="smaller sizes (a smoke run; figures are less stable)")
    parser.add_argument("--out", default=str(output("bench")),
                        help="report folder (default $WORKBENCH_HOME/output/bench; the figures "
                             "docs/performance.md quotes are in scripts/bench/results)")
    coldstart = parser.add_argument_group("coldstart (a generated query set against real ones) "
                                          "and holes (filling a judgment list's holes)")
    coldstart.add_argument("--generators", default="reference,llm",
                           help="query set generators to measure (default reference,llm)")
    coldstart.add_argument("--llm-url", help="the OpenAI-compatible base URL of the generating "
                                             "model (default $LLAMA_URL, else "
                                             "http://127.0.0.1:9600/v1, scripts/llama.sh)")
    coldstart.add_argument("--llm-queries", type=int,
                           help="documents (one query each) the LLM generator is given "
                                "(default 60; the reference generator always gets 150); for "
                                "holes, the queries the LLM fills (default 5)")
    coldstart.add_argument("--llm-pools", choices=("low", "single", "all"),
                           help="holes: the pools the LLM fills (default low: those where "
                                "holes as zeros gives tau <= 0.4)")
    coldstart.add_argument("--llm-model", help="holes: the model name sent to --llm-url "
                                               "(default \"model\", what llama.cpp accepts)")
    coldstart.add_argument("--fills", default="reference,llm",
                           help="holes: which fills to measure (default reference,llm; none "
                                "for the offline rankings alone)")
    coldstart.add_argument("--data", default=os.environ.get("WORKBENCH_DATA_DIR"),
                           help="folder with esci/ and ubi-sample/ (default $WORKBENCH_DATA_DIR, "
                                "else the demo data shipped in workbench/demo/data)")
    services = parser.add_argument_group("what is measured")
    services.add_argument("--opensearch-url", help="the cluster (default $OPENSEARCH_URL; in a "
                                                   "checkout, else started as for the tests)")
    services.add_argument("--redis-url", help="the broker (default $REDIS_URL; in a checkout, "
                                              "else started as for the tests)")
    services.add_argument("--workbench-url",
                          help="a running workbench to measure (on the same cluster) instead "
                               "of starting workbench serve/worker; benchmarks that need "
                               "processes of their own are skipped: " + ", ".join(OWN_PROCESSES))
    args = parser.parse_args(argv)
    chosen = args.only.split(",") if args.only else [b for b in BENCHMARKS if b not in OPT_IN]
    unknown = set(chosen) - set(BENCHMARKS)
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
    bench = Bench(quick=args.quick, out=Path(args.out), options={
        "generators": args.generators, "llm_url": args.llm_url,
        "llm_queries": args.llm_queries, "data": args.data, "llm_model": args.llm_model,
        "fills": args.fills, "llm_pools": args.llm_pools, "opensearch_url": args.opensearch_url,
        "redis_url": args.redis_url, "workbench_url": args.workbench_url})
    skipped = {name: OWN_PROCESSES[name] for name in chosen
               if args.workbench_url and name in OWN_PROCESSES}
    results: list[Result] = []
    try:
        for name in chosen:
            if name in skipped:
                print(f"== {name}: skipped with --workbench-url ({skipped[name]})", flush=True)
                continue
            module = importlib.import_module(f"workbench.bench.{name}")
            print(f"== {name}", flush=True)
            for result in module.run(bench):
                print(f"   {result.name}: {result.measured:.4g} vs {result.baseline:.4g} "
                      f"{result.unit} -> ratio {result.ratio:.3f}", flush=True)
                results.append(result)
            bench.close()  # each benchmark's servers and workers stop before the next starts
    finally:
        bench.close()
    command = "workbench bench" + (f" --only {args.only}" if args.only else "") + \
        (" --quick" if args.quick else "") + \
        (f" --generators {args.generators}" if args.generators != "reference,llm" else "") + \
        (f" --llm-url {args.llm_url}" if args.llm_url else "") + \
        (f" --llm-model {args.llm_model}" if args.llm_model else "") + \
        (f" --llm-queries {args.llm_queries}" if args.llm_queries else "") + \
        (f" --llm-pools {args.llm_pools}" if args.llm_pools else "") + \
        (f" --fills {args.fills}" if args.fills != "reference,llm" else "") + \
        (f" --workbench-url {args.workbench_url}" if args.workbench_url else "")
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    ran = set(chosen) - set(skipped)
    kept, earlier = previous_results(Path(args.out), ran) if args.only else ([], [])
    order = {name: i for i, name in enumerate(BENCHMARKS)}
    merged = sorted(kept + results, key=lambda r: order.get(r.benchmark, len(order)))
    path = write_report(merged, Path(args.out), {
        "date": date, "machine": machine(), "command": command,
        "runs": [*earlier, f"{command} ({date})"], "skipped": skipped})
    print(f"report: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
