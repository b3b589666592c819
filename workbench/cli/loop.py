"""The daily-loop commands of ``workbench``: query sets, judgments, search configurations,
experiments, TREC exports, the CI gate and monitors (``cli/monitor.py``), all over HTTP to a
running workbench.

Exit codes: 0 done (the gate: pass), 1 a job ended ERROR (the gate: regression), 2 usage,
file-format or infrastructure error.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

from workbench.cli import demo, formats, gate, monitor
from workbench.cli.client import ClientError, WorkbenchClient, authorization
from workbench.cli.output import err, print_ab_results, print_summary, wait_with_progress
from workbench.holes.sources import KINDS, is_kind, source_of

COMMANDS = ("query-set", "judgments", "search-config", "experiment", "export", "gate", "demo",
            "ab-test", "monitor")
TYPES = {"pointwise": "POINTWISE_EVALUATION", "pairwise": "PAIRWISE_COMPARISON",
         "hybrid": "HYBRID_OPTIMIZER"}


def add_commands(sub: Any) -> None:
    """Register the loop's subcommands on the ``workbench`` parser."""
    conn = argparse.ArgumentParser(add_help=False)
    group = conn.add_argument_group("connection")
    group.add_argument("--url", help="workbench URL (WORKBENCH_URL, default "
                                     "http://127.0.0.1:9400)")
    group.add_argument("--user", help="user for basic auth (WORKBENCH_USER)")
    group.add_argument("--password", help="password (WORKBENCH_PASSWORD); or set "
                                          "WORKBENCH_AUTHORIZATION to a whole header value")
    group.add_argument("--insecure", action="store_true", help="do not verify TLS certificates")
    group.add_argument("--timeout", type=float, default=3600.0,
                       help="seconds to wait for a job (default 3600)")

    qs = sub.add_parser("query-set", help="query sets from files").add_subparsers(
        dest="action", required=True)
    create = qs.add_parser("create", parents=[conn], help="create a query set from a file")
    create.add_argument("file", help="one query per line, JSON (list or querySetQueries) or "
                                     "NDJSON with queryText and custom fields")
    create.add_argument("--name", required=True)
    create.add_argument("--description")
    create.add_argument("--format", choices=("auto", "text", "json", "ndjson"), default="auto")

    gen = qs.add_parser("generate", parents=[conn],
                        help="generate a query set from an index's documents (an LLM, or the "
                             "reference generator with --reference)")
    gen.add_argument("--index", required=True, help="the index whose documents are sampled")
    gen.add_argument("--name", required=True)
    gen.add_argument("--description")
    source = gen.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="the model that writes the queries (modelId)")
    source.add_argument("--reference", action="store_true",
                        help="queries from the documents' own fields, no model")
    gen.add_argument("--queries", type=int, default=100,
                     help="how many documents to sample, one query each (default 100)")
    gen.add_argument("--context-fields", help="comma-separated fields the generator reads")
    gen.add_argument("--categories", help="comma-separated: lexical, semantic (default both)")
    gen.add_argument("--seed", type=int, default=0, help="the draw of documents (default 0)")
    gen.add_argument("--stratify-field", help="a keyword field to spread the draw over")
    gen.add_argument("--filter", metavar="JUDGE",
                     help="drop queries the judge (llm, token_overlap, semantic...) does not "
                          "rate relevant to their own source document")
    gen.add_argument("--max-tokens", type=int, help="stop before this many LLM tokens")
    gen.add_argument("--max-cost", type=float, help="stop before this cost (a priced model)")
    gen.add_argument("--no-wait", action="store_true", help="print the id and return")

    show_qs = qs.add_parser("show", parents=[conn],
                            help="a query set's queries; a generated one is waited for, and "
                                 "what its generation made and cost is said")
    show_qs.add_argument("query_set")

    jd = sub.add_parser("judgments", help="judgment lists").add_subparsers(
        dest="action", required=True)
    imp = jd.add_parser("import", parents=[conn],
                        help="import ratings from CSV, JSON or TREC qrels")
    imp.add_argument("file")
    imp.add_argument("--name", required=True)
    imp.add_argument("--description")
    imp.add_argument("--format", choices=("auto", "csv", "json", "qrels"), default="auto",
                     help="auto: by extension (.csv/.tsv, .json, .qrels), else by content")
    imp.add_argument("--topics", help="qrels: qid<TAB>query text lines, or a JSON object "
                                      "qid -> query text")
    imp.add_argument("--qid-as-query", action="store_true",
                     help="qrels: the qid column is the query text itself")
    imp.add_argument("--no-wait", action="store_true")
    known = jd.add_parser("known-items", parents=[conn],
                          help="judgments of a generated query set: each query's source "
                               "document rated relevant (known-item evaluation: MRR is then "
                               "the mean reciprocal rank of the document the query was made "
                               "from)")
    known.add_argument("query_set")
    known.add_argument("--name", required=True)
    known.add_argument("--description")
    show_j = jd.add_parser("show", parents=[conn],
                           help="a judgment's status and counters, and for an LLM judgment "
                                "its failed queries with the reasons (waiting while it runs)")
    show_j.add_argument("judgment")
    retry = jd.add_parser("retry", parents=[conn],
                          help="rate again the documents an LLM judgment failed on "
                               "(POST _retry), wait, and show the judgment")
    retry.add_argument("judgment")

    sc = sub.add_parser("search-config", help="search configurations").add_subparsers(
        dest="action", required=True)
    screate = sc.add_parser("create", parents=[conn],
                            help="create a search configuration from a file or inline JSON")
    screate.add_argument("source", help="a file or inline JSON: a whole body (name, index, "
                                        "query, searchPipeline) or just the query DSL")
    screate.add_argument("--name")
    screate.add_argument("--index")
    screate.add_argument("--pipeline", help="search pipeline")
    screate.add_argument("--description")
    sremote = sc.add_parser("remote", parents=[conn],
                            help="create a remote search configuration: another cluster, "
                                 "Solr or a JSON search API (docs/engines.md)")
    sremote.add_argument("connection_url", metavar="URL",
                         help="connectionUrl: the engine's search URL")
    sremote.add_argument("template", help="queryTemplate: a JSON body or a query string "
                                          "with %%SearchText%%")
    sremote.add_argument("--name", required=True)
    sremote.add_argument("--response", default="opensearch",
                         help="responseTemplate: a preset (opensearch, elasticsearch, solr) "
                              "or a JSON mapping (default opensearch)")
    sremote.add_argument("--username")
    sremote.add_argument("--password-env", metavar="VAR",
                         help="an environment variable holding the password (never a flag: "
                              "flags show in the process list)")
    sremote.add_argument("--rps", type=float, help="maxRequestsPerSecond (default 10)")
    sremote.add_argument("--concurrency", type=int,
                         help="maxConcurrentRequests (default 5)")
    sremote.add_argument("--cache-minutes", type=int,
                         help="cacheDurationMinutes (default 60; 0 caches nothing)")
    sremote.add_argument("--description")

    ex = sub.add_parser("experiment", help="experiments").add_subparsers(
        dest="action", required=True)
    run = ex.add_parser("run", parents=[conn],
                        help="create an experiment, wait for it, print its summary")
    run.add_argument("--type", choices=sorted(TYPES), default="pointwise")
    run.add_argument("--query-set", required=True)
    run.add_argument("--config", action="append", required=True, dest="configs",
                     help="search configuration id (repeat; the first is the baseline)")
    run.add_argument("--judgments", action="append", default=[],
                     help="judgment list id (repeat)")
    run.add_argument("--size", type=int, default=10)
    run.add_argument("--name")
    run.add_argument("--description")
    run.add_argument("--metric", help="emphasised metric (hybrid: ranks the variants; "
                                      "default: the server's, NDCG@k)")
    run.add_argument("--no-wait", action="store_true")
    show = ex.add_parser("summary", parents=[conn],
                         help="print an experiment's summary (waiting for it to end)")
    show.add_argument("experiment")
    show.add_argument("--baseline")
    show.add_argument("--metric")
    show.add_argument("--json", action="store_true", help="the raw _summary answer")
    show.add_argument("--human-judgments", metavar="ID",
                      help="a judgment list people made for part of the query set: correct "
                           "the judge's metrics with it (prediction-powered inference)")
    sample = ex.add_parser("label-sample", parents=[conn],
                           help="draw queries for people to label (a CSV to fill in and "
                                "import with `workbench judgments import`)")
    sample.add_argument("experiment", help="a pointwise experiment (waited for while it runs)")
    sample.add_argument("--queries", type=int, required=True, help="how many queries to label")
    sample.add_argument("--seed", type=int, help="draw this sample again (default: random, "
                                                 "printed)")
    sample.add_argument("--fields", help="document fields to show the raters, comma-separated "
                                         "(e.g. title,brand)")
    sample.add_argument("--out", required=True, help="the CSV file to write ('-': stdout)")

    fill = ex.add_parser("fill", parents=[conn],
                         help="rate the pairs a finished experiment retrieved that its judgment "
                              "lists leave unrated (its holes), into a new judgment list")
    fill.add_argument("experiment", help="a COMPLETED pointwise or hybrid experiment")
    rater = fill.add_mutually_exclusive_group(required=True)
    rater.add_argument("--model", help="the model that rates the holes (modelId)")
    rater.add_argument("--judge", help="a reference judge (token_overlap, semantic...)")
    fill.add_argument("--judge-options", help="the judge's options, a JSON object")
    fill.add_argument("--size", type=int, help="pool depth (default: the experiment's size)")
    fill.add_argument("--name", help="the new list's name (default: the experiment's, with "
                                     "holes filled)")
    fill.add_argument("--max-tokens", type=int, help="stop before this many LLM tokens")
    fill.add_argument("--max-cost", type=float, help="stop before this cost (a priced model)")
    fill.add_argument("--estimate", action="store_true",
                      help="print the pool and what filling would cost; start nothing")
    fill.add_argument("--wait", action="store_true",
                      help="wait for the new list (and with --rerun for the experiment)")
    fill.add_argument("--rerun", action="store_true",
                      help="once the list is COMPLETED, run the experiment again with it")

    exp = sub.add_parser("export", help="TREC run and qrels files").add_subparsers(
        dest="action", required=True)
    erun = exp.add_parser("run", parents=[conn],
                          help="an experiment's rankings as a TREC run (qid Q0 docid rank "
                               "score tag)")
    erun.add_argument("--experiment", required=True)
    erun.add_argument("--config", help="only this configuration")
    erun.add_argument("--out", required=True,
                      help="file; with several configurations use {name} or {config} in it, for "
                           "a hybrid run {variant}")
    erun.add_argument("--topics", help="qid<TAB>text mapping to reuse (e.g. the one the qrels "
                                       "were imported with)")
    erun.add_argument("--topics-out", help="write the qid<TAB>text mapping used")
    eq = exp.add_parser("qrels", parents=[conn],
                        help="judgments as TREC qrels (qid 0 docid rating)")
    source = eq.add_mutually_exclusive_group(required=True)
    source.add_argument("--judgment", action="append", help="judgment list id (repeat)")
    source.add_argument("--experiment", help="the judgment lists of this experiment")
    eq.add_argument("--out", required=True)
    eq.add_argument("--source", choices=KINDS,
                    help="only the ratings of this kind of source (a rating's source, else its "
                         "list's: an imported list is human)")
    eq.add_argument("--topics")
    eq.add_argument("--topics-out")

    ab = sub.add_parser("ab-test", help="online A/B tests by interleaving").add_subparsers(
        dest="action", required=True)
    ab_results = ab.add_parser("results", parents=[conn],
                               help="an A/B test's verdict: wins, ties, delta AB with its "
                                    "interval, the exact sign test, the busiest queries")
    ab_results.add_argument("test", help="the test id")
    ab_results.add_argument("--version", help="the test version (default: the current one)")
    ab_results.add_argument("--from", dest="since", help="impressions from this time on "
                                                        "(a timestamp or date math: now-7d)")
    ab_results.add_argument("--to", dest="until", help="impressions before this time")
    ab_results.add_argument("--json", action="store_true", help="the raw _results answer")
    ab_results.add_argument("--report", metavar="FILE",
                            help="also write the HTML report, with its plot over time")

    demo.add_command(sub, conn)
    monitor.add_command(sub, conn)

    gate_cmd = sub.add_parser(
        "gate", parents=[conn],
        help="fail (exit 1) when a candidate configuration is significantly worse",
        description="Compare a candidate search configuration with a baseline on a query set "
                    "and judgments. Exit 0 pass, 1 regression (the metric dropped by more "
                    "than --margin with paired t-test p < --alpha), 2 usage or "
                    "infrastructure error.")
    gate_cmd.add_argument("--baseline", required=True, help="search configuration id")
    gate_cmd.add_argument("--candidate", required=True, help="search configuration id")
    gate_cmd.add_argument("--query-set")
    gate_cmd.add_argument("--judgments", action="append", default=[])
    gate_cmd.add_argument("--experiment", help="reuse this pointwise experiment (over both "
                                               "configurations) instead of running one")
    gate_cmd.add_argument("--metric", default="NDCG@10")
    gate_cmd.add_argument("--margin", type=float, default=0.01)
    gate_cmd.add_argument("--alpha", type=float, default=0.05)
    gate_cmd.add_argument("--size", type=int,
                          help="k of the run (default: the metric's @k, else 10)")
    gate_cmd.add_argument("--human-judgments", metavar="ID",
                          help="a judgment list people made for part of the query set: decide "
                               "on the prediction-powered interval of the difference instead "
                               "of the judgments alone")


def run(args: argparse.Namespace) -> int:
    """Run one loop command; map failures to exit code 2 with a one-line message."""
    client = WorkbenchClient(args.url, authorization(args.user, args.password),
                             verify=not args.insecure)
    handler = {
        ("query-set", "create"): _query_set_create,
        ("query-set", "generate"): _query_set_generate,
        ("query-set", "show"): _query_set_show,
        ("judgments", "import"): _judgments_import,
        ("search-config", "create"): _search_config_create,
        ("search-config", "remote"): _search_config_remote,
        ("experiment", "run"): _experiment_run,
        ("experiment", "summary"): _experiment_summary,
        ("experiment", "label-sample"): _label_sample,
        ("experiment", "fill"): _experiment_fill,
        ("judgments", "show"): _judgments_show,
        ("judgments", "known-items"): _judgments_known_items,
        ("judgments", "retry"): _judgments_retry,
        ("export", "run"): _export_run,
        ("export", "qrels"): _export_qrels,
        ("gate", None): _gate,
        ("ab-test", "results"): _ab_test_results,
        ("demo", None): demo.run,
        ("monitor", "create"): monitor.create,
        ("monitor", "list"): monitor.list_monitors,
        ("monitor", "runs"): monitor.show_runs,
        ("monitor", "report"): monitor.write_report,
        ("monitor", "run"): monitor.run_now,
    }[(args.command, getattr(args, "action", None))]
    try:
        return handler(client, args)
    except (ClientError, formats.FormatError, gate.GateError, OSError) as exc:
        print(f"workbench {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"workbench {args.command}: interrupted (a job already started keeps running on "
              "the server)", file=sys.stderr)
        return 130


# create -------------------------------------------------------------------------------------

def _query_set_create(client: WorkbenchClient, args: argparse.Namespace) -> int:
    queries = formats.parse_queries(_read(args.file), args.format)
    if not queries:
        raise formats.FormatError(f"{args.file} holds no query")
    body = {"name": args.name, "sampling": "manual", "querySetQueries": queries}
    if args.description:
        body["description"] = args.description
    answer = client.srw("PUT", "/query_sets", body)
    err.print(f"query set {args.name!r}: {len(queries)} queries")
    print(answer["query_set_id"])
    return 0


def _query_set_generate(client: WorkbenchClient, args: argparse.Namespace) -> int:
    body: dict[str, Any] = {
        "name": args.name, "index": args.index, "numberOfQueryTerms": args.queries,
        "sampling": "reference_random" if args.reference else "llm_random", "seed": args.seed}
    if args.model:
        body["modelId"] = args.model
    for key, value in (("description", args.description),
                       ("stratifyField", args.stratify_field), ("maxTokens", args.max_tokens),
                       ("maxCost", args.max_cost)):
        if value is not None:
            body[key] = value
    if args.filter:
        body["filter"] = {"judge": args.filter}
    for key, value in (("contextFields", args.context_fields),
                       ("categories", args.categories)):
        if value:
            body[key] = [v.strip() for v in value.split(",") if v.strip()]
    query_set_id = client.srw("PUT", "/query_sets", body)["query_set_id"]
    by = "the reference generator" if args.reference else f"model {args.model}"
    err.print(f"query set {args.name!r}: {args.queries} documents of {args.index}, queries by "
              f"{by}")
    print(query_set_id)
    if args.no_wait:
        return 0
    doc = wait_with_progress(client, "query_sets", query_set_id, "generating", args.timeout)
    if doc.get("status") != "COMPLETED":
        reason = (doc.get("metadata") or {}).get("error") or "no reason given"
        err.print(f"query set {query_set_id} ended {doc.get('status')}: {reason}",
                  soft_wrap=True, markup=False)
        return 1
    err.print(generation_line(doc), soft_wrap=True, markup=False)
    return 0


def _query_set_show(client: WorkbenchClient, args: argparse.Namespace) -> int:
    doc = wait_with_progress(client, "query_sets", args.query_set, "generating", args.timeout)
    for entry in doc.get("querySetQueries") or []:
        print(entry.get("queryText", ""))
    if doc.get("status") not in (None, "COMPLETED"):
        return _ended(doc, "query set")
    if doc.get("generation"):
        err.print(generation_line(doc), soft_wrap=True, markup=False)
    return 0


def generation_line(doc: dict[str, Any]) -> str:
    """One line saying what a generated set holds and what its generation cost."""
    entries = doc.get("querySetQueries") or []
    kinds: dict[str, int] = {}
    for entry in entries:
        kind = str((entry.get("customFields") or {}).get("category") or "?")
        kinds[kind] = kinds.get(kind, 0) + 1
    made = doc.get("generation") or {}
    parts = [f"{len(entries)} {'query' if len(entries) == 1 else 'queries'} ("
             + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
             + f") from {made.get('documents', '?')} documents"]
    if made.get("duplicates"):
        parts.append(f"{made['duplicates']} duplicates dropped")
    if made.get("refusedQueries"):
        parts.append(f"{made['refusedQueries']} answers broke the query-text rules")
    if made.get("failedDocuments"):
        parts.append(f"{made['failedDocuments']} documents failed: "
                     f"{made.get('lastFailureReason')}")
    usage = made.get("usage")
    if usage:
        parts.append(f"{usage['llmCalls']} LLM calls, {usage['inputTokens']} input and "
                     f"{usage['outputTokens']} output tokens")
    return "; ".join(parts)


def _judgments_import(client: WorkbenchClient, args: argparse.Namespace) -> int:
    text = _read(args.file)
    fmt = formats.judgments_format(args.file, text) if args.format == "auto" else args.format
    topics = formats.parse_topics(_read(args.topics)) if args.topics else None
    ratings = formats.parse_judgments(text, fmt, topics, args.qid_as_query)
    count = sum(len(row["ratings"]) for row in ratings)
    return _import(client, args, ratings, f"{count} ratings of {len(ratings)} queries ({fmt})",
                   wait=not args.no_wait)


def _import(client: WorkbenchClient, args: argparse.Namespace, ratings: list[dict[str, Any]],
            said: str, wait: bool = True) -> int:
    """An ``IMPORT_JUDGMENT`` of ``ratings`` named ``--name``: its id printed, waited for."""
    body = {"name": args.name, "type": "IMPORT_JUDGMENT", "judgmentRatings": ratings}
    if args.description:
        body["description"] = args.description
    judgment_id = client.srw("PUT", "/judgments", body)["judgment_id"]
    err.print(f"judgments {args.name!r}: {said}")
    print(judgment_id)
    if not wait:
        return 0
    doc = wait_with_progress(client, "judgments", judgment_id, "importing", args.timeout)
    return _ended(doc, "judgment")


def _judgments_known_items(client: WorkbenchClient, args: argparse.Namespace) -> int:
    doc = client.get("query_sets", args.query_set)
    if doc.get("status") not in (None, "COMPLETED"):
        raise formats.FormatError(f"query set {args.query_set} is {doc.get('status')}; "
                                  "wait until it is COMPLETED")
    ratings = known_item_ratings(doc.get("querySetQueries") or [])
    if not ratings:
        raise formats.FormatError(f"query set {args.query_set} has no query with a source "
                                  "document (sourceDocId): it was not generated from an index")
    return _import(client, args, ratings, f"the source documents of {len(ratings)} queries")


def known_item_ratings(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``judgmentRatings`` rating each generated query's source document 1 (nothing else is
    rated: every other hit counts as not relevant, as in known-item evaluation)."""
    out = []
    for entry in entries:
        source = (entry.get("customFields") or {}).get("sourceDocId")
        if source:
            out.append({"query": entry["queryText"],
                        "ratings": [{"docId": source, "rating": "1"}]})
    return out


def _judgments_show(client: WorkbenchClient, args: argparse.Namespace) -> int:
    doc = wait_with_progress(client, "judgments", args.judgment, "running", args.timeout)
    print("\n".join(judgment_lines(doc)))
    return _ended(doc, "judgment")


def _judgments_retry(client: WorkbenchClient, args: argparse.Namespace) -> int:
    answer = client.srw("POST", f"/judgments/{args.judgment}/_retry")
    err.print(f"judgment {args.judgment}: {answer.get('message', 'retrying')}")
    doc = wait_with_progress(client, "judgments", args.judgment, "retrying", args.timeout)
    print("\n".join(judgment_lines(doc)))
    return _ended(doc, "judgment")


def judgment_lines(doc: dict[str, Any], shown: int = 20) -> list[str]:
    """A judgment as ``judgments show`` prints it: status, counters, and each failed query with
    its documents left unrated and why (the first ``shown`` queries)."""
    meta = doc.get("metadata") or {}
    entries = doc.get("judgmentRatings") or []
    lines = [f"judgment {doc.get('id')} {doc.get('name')!r} ({doc.get('type')}) · "
             f"{doc.get('status')}"]
    ratings = sum(len(e.get("ratings") or []) for e in entries)
    if "totalQueries" in meta:
        lines.append(f"queries: {meta['totalQueries']} total, {meta.get('successfulQueries')} "
                     f"successful, {meta.get('failedQueries')} failed; {ratings} ratings")
    else:
        lines.append(f"queries: {len(entries)}; {ratings} ratings")
    if meta.get("lastFailureReason"):
        lines.append(f"last failure: {meta['lastFailureReason']}")
    failed = [e for e in entries if e.get("failures")]
    for entry in failed[:shown]:
        lines.append(f"  {entry['query']!r}: {len(entry['failures'])} unrated")
        reasons: dict[str, list[str]] = {}
        for failure in entry["failures"]:
            reasons.setdefault(failure.get("reason") or "no reason recorded", []).append(
                failure["docId"])
        for reason, doc_ids in reasons.items():
            lines.append(f"    {', '.join(doc_ids)}: {reason}")
    if len(failed) > shown:
        lines.append(f"  ... and {len(failed) - shown} more failed queries")
    if failed and doc.get("status") == "COMPLETED":
        lines.append(f"retry them: workbench judgments retry {doc.get('id')}")
    return lines


def _search_config_create(client: WorkbenchClient, args: argparse.Namespace) -> int:
    source = args.source
    text = source if source.lstrip()[:1] in "{[" else _read(source)
    data = formats._json(text)
    if not isinstance(data, dict):
        raise formats.FormatError("a search configuration is a JSON object")
    body = dict(data) if "index" in data else {"query": data}
    for key, value in (("name", args.name), ("index", args.index),
                       ("searchPipeline", args.pipeline), ("description", args.description)):
        if value:
            body[key] = value
    missing = [key for key in ("name", "index", "query") if not body.get(key)]
    if missing:
        raise formats.FormatError(f"missing {', '.join(missing)} (give --name/--index, or put "
                                  "them in the JSON)")
    if not isinstance(body["query"], str):
        body["query"] = json.dumps(body["query"])
    answer = client.srw("PUT", "/search_configurations", body)
    err.print(f"search configuration {body['name']!r} on {body['index']}")
    print(answer["search_configuration_id"])
    return 0


def _search_config_remote(client: WorkbenchClient, args: argparse.Namespace) -> int:
    response: Any = args.response
    if response.lstrip()[:1] == "{":
        response = formats._json(response)
    body: dict[str, Any] = {"name": args.name, "connectionUrl": args.connection_url,
                            "queryTemplate": args.template, "responseTemplate": response}
    for key, value in (("username", args.username), ("description", args.description),
                       ("maxRequestsPerSecond", args.rps),
                       ("maxConcurrentRequests", args.concurrency),
                       ("cacheDurationMinutes", args.cache_minutes)):
        if value is not None:
            body[key] = value
    if args.password_env:
        if args.password_env not in os.environ:
            raise formats.FormatError(f"--password-env: {args.password_env} is not set")
        body["password"] = os.environ[args.password_env]
    answer = client.srw("PUT", "/remote_search_configurations", body)
    err.print(f"remote search configuration {args.name!r} on {args.connection_url}")
    print(answer["remote_search_configuration_id"])
    return 0


# experiments --------------------------------------------------------------------------------

def _experiment_run(client: WorkbenchClient, args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"type": TYPES[args.type], "querySetId": args.query_set,
                            "searchConfigurationList": args.configs,
                            "judgmentList": args.judgments, "size": args.size}
    for key in ("name", "description"):
        if getattr(args, key):
            body[key] = getattr(args, key)
    experiment_id = client.srw("PUT", "/experiments", body)["experiment_id"]
    err.print(f"experiment {experiment_id} ({body['type']})")
    if args.no_wait:
        print(experiment_id)
        return 0
    doc = wait_with_progress(client, "experiments", experiment_id, "running", args.timeout)
    if doc.get("status") != "COMPLETED":
        return _ended(doc, "experiment")
    print_summary(_summary(client, experiment_id, args.configs[0], args.metric), args.metric)
    return 0


def _experiment_summary(client: WorkbenchClient, args: argparse.Namespace) -> int:
    """The summary, once the experiment has ended: one started with ``run --no-wait`` (whose
    id a script keeps) is waited for here, with the same progress bar."""
    doc = wait_with_progress(client, "experiments", args.experiment, "running", args.timeout)
    if doc.get("status") != "COMPLETED":
        return _ended(doc, "experiment")
    summary = _summary(client, args.experiment, args.baseline, args.metric,
                       human=args.human_judgments)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print_summary(summary, args.metric)
    return 0


def _summary(client: WorkbenchClient, experiment_id: str, baseline: str | None,
             metric: str | None, alpha: float | None = None,
             human: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {}
    if human:
        params["humanJudgments"] = human
    if metric:
        params["metric"] = metric
    if baseline:
        params["baseline"] = baseline
    if alpha is not None:
        params["alpha"] = alpha
    return client.srw("GET", f"/experiments/{experiment_id}/_summary", params=params)


def _label_sample(client: WorkbenchClient, args: argparse.Namespace) -> int:
    """The sample, once the experiment has ended (its pool is the finished rankings)."""
    doc = wait_with_progress(client, "experiments", args.experiment, "running", args.timeout)
    if doc.get("status") != "COMPLETED":
        return _ended(doc, "experiment")
    params: dict[str, Any] = {"queries": args.queries}
    if args.seed is not None:
        params["seed"] = args.seed
    fields = [f.strip() for f in (args.fields or "").split(",") if f.strip()]
    if fields:
        params["fields"] = ",".join(fields)
    sample = client.srw("GET", f"/experiments/{args.experiment}/_label_sample", params=params)
    from workbench.experiments import label_sample  # numpy: only for this command

    text = label_sample.as_csv(sample["rows"], fields)
    if args.out == "-":
        sys.stdout.write(text)
    else:
        Path(args.out).write_text(text, encoding="utf-8")
    err.print(f"{sample['queries']['sampled']} of {sample['queries']['total']} queries, "
              f"{sample['documents']} documents to rate (seed {sample['seed']}) -> {args.out}; "
              "fill in the rating column, then `workbench judgments import "
              f"{args.out if args.out != '-' else 'FILE'} --name ...`")
    return 0


def _experiment_fill(client: WorkbenchClient, args: argparse.Namespace) -> int:
    """``POST experiments/{id}/_fill`` (or its ``_estimate``): the pool, the new list's id, and
    with ``--rerun`` the experiment run again with the list (docs/holes.md). An experiment
    still running (``run --no-wait``) is waited for first: its pool is the finished rankings."""
    started = wait_with_progress(client, "experiments", args.experiment, "running", args.timeout)
    if started.get("status") != "COMPLETED":
        return _ended(started, "experiment")
    body: dict[str, Any] = {}
    if args.model:
        body["modelId"] = args.model
    else:
        body["judge"] = args.judge
        if args.judge_options:
            body["judgeOptions"] = formats._json(args.judge_options)
    for key, value in (("size", args.size), ("name", args.name), ("maxTokens", args.max_tokens),
                       ("maxCost", args.max_cost)):
        if value is not None:
            body[key] = value
    path = f"/experiments/{quote(args.experiment, safe='')}/_fill"
    if args.estimate:
        estimate = client.srw("POST", f"{path}/_estimate", body)
        err.print(pool_line(estimate["pool"]), soft_wrap=True, markup=False)
        cost = estimate.get("cost")
        print(f"{estimate['pairsToRate']} pairs to rate, {estimate['calls']} calls"
              + (f", {estimate['totalTokens']} tokens" if "totalTokens" in estimate else "")
              + (f", cost {cost:.4f}" if cost is not None else ""))
        return 0
    answer = client.srw("POST", path, body)
    judgment_id = answer["judgment_id"]
    err.print(pool_line(answer["pool"]), soft_wrap=True, markup=False)
    print(judgment_id)
    if not (args.wait or args.rerun):
        return 0
    doc = wait_with_progress(client, "judgments", judgment_id, "filling", args.timeout)
    if doc.get("status") != "COMPLETED":
        return _ended(doc, "judgment")
    meta = doc.get("metadata") or {}
    err.print(f"rated {meta.get('filled')} pairs, {meta.get('failed')} left unrated; sources "
              + ", ".join(f"{k} {v}" for k, v in (meta.get("sources") or {}).items()),
              soft_wrap=True, markup=False)
    if not args.rerun:
        return 0
    experiment = client.get("experiments", args.experiment)
    kept = ("type", "querySetId", "searchConfigurationList", "size")
    rerun: dict[str, Any] = {key: experiment[key] for key in kept if key in experiment}
    rerun["judgmentList"] = [judgment_id]
    experiment_id = client.srw("PUT", "/experiments", rerun)["experiment_id"]
    err.print(f"experiment {experiment_id} ({rerun.get('type')}) with the filled list")
    print(experiment_id)
    if not args.wait:
        return 0
    done = wait_with_progress(client, "experiments", experiment_id, "running", args.timeout)
    return _ended(done, "experiment")


def pool_line(pool: dict[str, Any]) -> str:
    return (f"pool: {pool['queries']} queries, {pool['pairs']} pairs, {pool['rated']} rated, "
            f"{pool['unrated']} unrated")


def _ended(doc: dict[str, Any], what: str) -> int:
    if doc.get("status") == "COMPLETED":
        return 0
    reason = (doc.get("metadata") or {}).get("error") or next(
        (r.get("error") for r in doc.get("results") or [] if isinstance(r, dict)), None)
    print(f"workbench: {what} {doc.get('id')} ended {doc.get('status')}: {reason}",
          file=sys.stderr)
    return 1


# exports ------------------------------------------------------------------------------------

def _export_run(client: WorkbenchClient, args: argparse.Namespace) -> int:
    """One TREC run per configuration (and per hybrid variant: its parameters, since a hybrid
    run gives every query its own variant ids)."""
    experiment = client.get("experiments", args.experiment)
    kind = experiment.get("type")
    if kind not in ("POINTWISE_EVALUATION", "HYBRID_OPTIMIZER"):
        raise formats.FormatError("runs are exported from POINTWISE_EVALUATION and "
                                  f"HYBRID_OPTIMIZER experiments (this one is {kind})")
    configs = [args.config] if args.config else list(experiment["searchConfigurationList"])
    if len(configs) > 1 and not re.search(r"\{(name|config)\}", args.out):
        raise formats.FormatError("the experiment has several configurations: give --config "
                                  "or put {name} or {config} in --out")
    if kind == "HYBRID_OPTIMIZER" and "{variant}" not in args.out:
        raise formats.FormatError("a hybrid experiment has one run per variant: put {variant} "
                                  "in --out")
    evaluations = client.evaluations(args.experiment)
    qids = _qids(args.topics, (e["searchText"] for e in evaluations))
    for config_id in configs:
        name = _configuration_name(client, config_id)
        variants: dict[str, list[dict[str, Any]]] = {}
        for e in evaluations:
            if e.get("searchConfigurationId") == config_id:
                variants.setdefault(e.get("experimentVariantParameters") or "", []).append(e)
        for params, mine in sorted(variants.items()):
            variant = _slug(params)
            path = (args.out.replace("{config}", config_id).replace("{name}", _slug(name))
                    .replace("{variant}", variant))
            tag = f"{name} {variant}" if variant else name
            Path(path).write_text(formats.run_lines(mine, qids, tag))
            if not variant:
                err.print(f"{path}: {len(mine)} queries of {name!r}")
        if len(variants) > 1 or any(variants):
            err.print(f"{len(variants)} variant runs of {name!r}")
    _write_topics(args.topics_out, qids)
    return 0


def _configuration_name(client: WorkbenchClient, config_id: str) -> str:
    """A search configuration's name: a local one, else a remote one (docs/engines.md)."""
    try:
        found = client.get("search_configurations", config_id)
    except ClientError:
        found = client.get("remote_search_configurations", config_id)
    return str(found.get("name") or config_id)


def _slug(text: str) -> str:
    """A file-name- and tag-safe form of a name or of hybrid parameters."""
    return re.sub(r"[^\w.-]+", "_", text).strip("_")


def _export_qrels(client: WorkbenchClient, args: argparse.Namespace) -> int:
    ids = args.judgment or client.get("experiments", args.experiment).get("judgmentList") or []
    if not ids:
        raise formats.FormatError("the experiment has no judgment list")
    docs = [client.get("judgments", i) for i in ids]
    ratings = formats.merged_ratings(_of_source(doc, args.source) for doc in docs)
    qids = _qids(args.topics, (row["query"] for row in ratings))
    Path(args.out).write_text(formats.qrels_lines(ratings, qids))
    count = sum(len(row["ratings"]) for row in ratings)
    err.print(f"{args.out}: {count} ratings of {len(ratings)} queries")
    _write_topics(args.topics_out, qids)
    return 0


def _of_source(doc: dict[str, Any], kind: str | None) -> list[dict[str, Any]]:
    """A list's ``judgmentRatings``, only the ratings of ``kind`` when one is given."""
    rows = doc.get("judgmentRatings") or []
    if kind is None:
        return list(rows)
    default = source_of(doc)
    return [{**row, "ratings": [r for r in row.get("ratings") or []
                                if is_kind(str(r.get("source") or default), kind)]}
            for row in rows]


def _qids(topics_file: str | None, texts: Any) -> dict[str, str]:
    """query text -> qid: the topics file's ids where it has the text, else a stable hash."""
    known = ({text: qid for qid, text in formats.parse_topics(_read(topics_file)).items()}
             if topics_file else {})
    return {text: known.get(text) or formats.qid_for(text) for text in sorted(set(texts))}


def _write_topics(path: str | None, qids: dict[str, str]) -> None:
    if path:
        Path(path).write_text(formats.topics_text(qids))


# gate ---------------------------------------------------------------------------------------

def _gate(client: WorkbenchClient, args: argparse.Namespace) -> int:
    if args.baseline == args.candidate:
        raise gate.GateError("--baseline and --candidate are the same configuration")
    experiment_id = args.experiment or _gate_experiment(client, args)
    doc = client.get("experiments", experiment_id)
    if doc.get("status") in ("PROCESSING", "RETRYING"):
        doc = wait_with_progress(client, "experiments", experiment_id, "gate", args.timeout)
    if doc.get("status") != "COMPLETED":
        _ended(doc, "experiment")
        return gate.ERROR
    configs = doc.get("searchConfigurationList") or []
    for role, config_id in (("baseline", args.baseline), ("candidate", args.candidate)):
        if config_id not in configs:
            raise gate.GateError(f"the experiment does not run the {role} {config_id}")
    summary = _summary(client, experiment_id, args.baseline, args.metric, args.alpha,
                       human=args.human_judgments)
    verdict = gate.decide(summary, args.candidate, args.metric, args.margin, args.alpha,
                          human=bool(args.human_judgments))
    names = {c["searchConfigurationId"]: f"{c.get('name')} ({c['searchConfigurationId']})"
             for c in summary.get("configurations") or []}
    print("\n".join(gate.explain(verdict, names, experiment_id)))  # plain: no wrapping
    return verdict.code


def _gate_experiment(client: WorkbenchClient, args: argparse.Namespace) -> str:
    if not args.query_set or not args.judgments:
        raise gate.GateError("give --query-set and --judgments (or --experiment)")
    size = args.size or _metric_k(args.metric) or 10
    body = {"type": "POINTWISE_EVALUATION", "querySetId": args.query_set,
            "searchConfigurationList": [args.baseline, args.candidate],
            "judgmentList": args.judgments, "size": size,
            "description": f"workbench gate: {args.candidate} vs {args.baseline}"}
    experiment_id: str = client.srw("PUT", "/experiments", body)["experiment_id"]
    err.print(f"gate experiment {experiment_id}")
    return experiment_id


def _metric_k(metric: str) -> int | None:
    found = re.search(r"@(\d+)$", metric)
    return int(found.group(1)) if found else None


def _read(path: str) -> str:
    """A file's text ("-": standard input); a ``.gz`` file is decompressed."""
    if path == "-":
        return sys.stdin.read()
    if path.lower().endswith(".gz"):
        return gzip.decompress(Path(path).read_bytes()).decode("utf-8-sig")
    return Path(path).read_text(encoding="utf-8-sig")


def _ab_test_results(client: WorkbenchClient, args: argparse.Namespace) -> int:
    params = {k: v for k, v in (("version", args.version), ("from", args.since),
                                ("to", args.until)) if v is not None}
    path = f"/ab_tests/{quote(args.test, safe='')}"
    result = client.srw("GET", f"{path}/_results", params=params)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_ab_results(result)
    if args.report:
        page = client.srw("GET", f"{path}/_report", params=params)
        Path(args.report).write_text(str(page), encoding="utf-8")
    return 0
