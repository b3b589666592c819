"""The ``workbench`` command: serve, worker, init-indices, load-demo, status, and the daily loop
over a running server (query-set, judgments, search-config, experiment, export, gate:
``workbench/cli/loop.py``)."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from typing import Any

from workbench.config import Config, ConfigError
from workbench.telemetry.logs import setup_logging

log = logging.getLogger("workbench")

#: every module that registers jobs; a worker imports them all (the API sends jobs by name)
TASK_MODULES = ("workbench.jobs.tasks", "workbench.judgments.tasks",
                "workbench.experiments.tasks", "workbench.evaluation.tasks",
                "workbench.querygen.tasks", "workbench.holes.tasks", "workbench.monitors.tasks")


#: the commands that run for long and record metrics (docs/metrics.md)
METERED = ("serve", "worker", "scheduler")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] and argv[0] in METERED:
        _enable_metrics(argv[0])
    parser = argparse.ArgumentParser(
        prog="workbench", description="OpenSearch-compatible Search Relevance Workbench"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the API server (gunicorn)")
    serve.add_argument("--host", help="listen address (WORKBENCH_HOST)")
    serve.add_argument("--port", type=int, help="listen port (WORKBENCH_PORT)")
    serve.add_argument("--workers", type=int, help="processes (WORKBENCH_WEB_WORKERS)")
    serve.add_argument("--front", choices=("auto", "haproxy", "none"),
                       help="HAProxy in front of gunicorn, or not (WORKBENCH_FRONT)")

    worker = sub.add_parser("worker", help="run a Celery worker that executes jobs")
    worker.add_argument("--concurrency", type=int,
                        help="jobs at once (WORKBENCH_WORKER_CONCURRENCY)")
    worker.add_argument("--no-supervise", action="store_true",
                        help="run the job consumer in this process, not under a supervisor "
                             "that restarts it (for systemd, Kubernetes or another supervisor)")

    sub.add_parser("scheduler", help="run the scheduler that starts scheduled experiments")

    sub.add_parser("init-indices", help="create the system indices (idempotent)")

    demo = sub.add_parser("load-demo", help="index the demo product catalogue and UBI data "
                                             "(the shipped files unless others are named)")
    demo.add_argument("--products", help="a product catalogue, JSON lines (gzipped or not); "
                                         "alone, only it is loaded")
    demo.add_argument("--products-index", default="ecommerce")
    demo.add_argument("--ubi", help="UBI queries and events, bulk NDJSON (gzipped or not); "
                                    "alone, only it is loaded")

    sub.add_parser("status", help="check the cluster, Redis and the workers")

    sub.add_parser("bench", help="run the benchmarks (workbench/bench; pass --help for options)",
                   add_help=False)

    show = sub.add_parser("config", help="print the effective settings (secrets masked)")
    show.add_argument("--markdown", action="store_true",
                      help="the settings table of docs/configuration.md")

    from workbench.cli import loop

    loop.add_commands(sub)

    sub.add_parser("healthcheck", help="exit 0 when this container's workbench command is "
                                        "healthy (the image's HEALTHCHECK)")

    if argv[:1] == ["bench"]:
        return _bench(argv[1:])
    if argv[:1] == ["healthcheck"]:  # reads no settings: it runs every 30 s and must not fail
        from workbench.cli import healthcheck

        return healthcheck.run()
    args = parser.parse_args(argv)
    if args.command in loop.COMMANDS:
        return loop.run(args)  # a client of the server: the server's settings do not apply
    try:
        config = Config.from_env()
        if args.command in ("serve", "worker"):
            from workbench.llm.registry import load_registry

            load_registry(config)  # a bad models list stops start-up, not a judgment later
    except ConfigError as exc:
        print(f"workbench: configuration error: {exc}", file=sys.stderr)
        return 2
    setup_logging(config.log_level, config.log_format)
    handler = {
        "serve": _serve,
        "worker": _worker,
        "init-indices": _init_indices,
        "scheduler": _scheduler,
        "load-demo": _load_demo,
        "status": _status,
        "config": _show_config,
    }[args.command]
    return handler(config, args)


def _enable_metrics(command: str) -> None:
    """Point this process's samples at the metrics folder before anything imports
    prometheus-client, which reads the folder once (``telemetry.exporter``). A bad setting is
    reported later, with the others."""
    from workbench.telemetry import exporter

    try:
        config = Config.from_env()
    except ConfigError:
        return
    exporter.enable(config, command)


def _serve(config: Config, args: argparse.Namespace) -> int:
    from workbench.serving import front
    from workbench.serving.gunicorn_app import run_server
    from workbench.telemetry import exporter

    overrides: dict[str, Any] = {}
    if args.host:
        overrides["host"] = args.host
    if args.port is not None:
        overrides["port"] = args.port
    if args.workers:
        overrides["web_workers"] = args.workers
    if args.front:
        overrides["front"] = args.front
    config = config.with_overrides(**overrides)
    try:
        haproxy = front.chosen_front(config)
    except ConfigError as exc:
        print(f"workbench: configuration error: {exc}", file=sys.stderr)
        return 2
    _try_init_indices(config)
    exporter.serve(config)
    if haproxy:
        return front.run(config, haproxy)
    run_server(config)
    return 0


def _worker(config: Config, args: argparse.Namespace) -> int:
    from workbench.jobs.supervisor import SUPERVISOR_ENV
    from workbench.telemetry import exporter

    if args.concurrency:
        config = config.with_overrides(worker_concurrency=args.concurrency)
    if not os.environ.get(SUPERVISOR_ENV):  # a supervised consumer's supervisor listens
        exporter.serve(config)
    if not args.no_supervise:
        return _supervise(config)
    return _consume(config)


def _supervise(config: Config) -> int:
    """Run the consumer as a child that is started again whenever it dies (``jobs.supervisor``).
    The child is this same program (``python -m X`` runs X again, so a module that registers
    extra tasks keeps them) and reads the same environment."""
    from workbench.jobs import supervisor

    spec = getattr(sys.modules["__main__"], "__spec__", None)
    module = spec.name if spec is not None else "workbench.cli"
    module = module.removesuffix(".__main__")  # ``python -m workbench.cli`` runs the package
    command = [sys.executable, "-m", module, "worker", "--no-supervise",
               "--concurrency", str(config.worker_concurrency)]
    log.info("supervising the job consumer: %s", " ".join(command[2:]))
    return supervisor.supervise(command, supervisor.Record(config, config.task_queue))


def _consume(config: Config) -> int:
    from workbench.jobs import supervisor
    from workbench.jobs.celery_app import configure

    supervisor.bind_to_supervisor()
    _try_init_indices(config)
    app = configure(config, TASK_MODULES)

    from celery.signals import worker_process_init, worker_ready

    from workbench.jobs import sweeper
    from workbench.llm.tokens import encoding
    from workbench.store.client import make_client

    encoding()  # load the tokenizer (~0.25 s) once, before the pool forks, not in each first job

    @worker_process_init.connect(weak=False)
    def _die_with_consumer(**_: object) -> None:
        supervisor.die_with_parent()

    @worker_ready.connect(weak=False)
    def _sweep_stuck_jobs(**_: object) -> None:
        from workbench import redis_client
        from workbench.jobs.queue import enqueue

        lease_redis = redis_client.connect(config, socket_timeout=10)
        sweeper.start(lambda: make_client(config), lambda: lease_redis, config.lease_seconds,
                      config.job_max_attempts, enqueue)

    app.worker_main(
        [
            # No start-up banner (plain text on stdout) among JSON lines.
            *(["--quiet"] if config.log_format == "json" else []),
            "worker",
            "--loglevel", config.log_level,
            "--concurrency", str(config.worker_concurrency),
            "--queues", config.task_queue,
            "--hostname", f"workbench@%h-{config.task_queue}",
            "--without-gossip",
            "--without-mingle",
        ]
    )
    return 0


def _scheduler(config: Config, _: argparse.Namespace) -> int:
    from workbench.experiments.scheduling import Scheduler
    from workbench.jobs.celery_app import configure
    from workbench.monitors.scheduling import MonitorScheduler
    from workbench.services import Services
    from workbench.telemetry import exporter

    _try_init_indices(config)
    configure(config)
    exporter.serve(config)
    log.info("scheduler started (every %gs)", config.scheduler_interval)
    svc = Services(config)
    # A stop signal ends the loop between ticks. As PID 1 of a container the process would
    # otherwise ignore SIGTERM (no default action there) and be killed after the grace period.
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    # monitors fire from this process too; experiments know nothing of them (docs/monitors.md)
    MonitorScheduler(svc).start(config.scheduler_interval)
    Scheduler(svc).run_forever(config.scheduler_interval, stop)
    log.info("scheduler stopped")
    return 0


def _init_indices(config: Config, _: argparse.Namespace) -> int:
    from workbench.store.bootstrap import ensure_indices
    from workbench.store.client import make_client

    created = ensure_indices(make_client(config), config.index_mappings_dir)
    print("created: " + (", ".join(created) if created else "nothing (all indices exist)"))
    return 0


def _try_init_indices(config: Config) -> None:
    """Create the system indices at start-up when the cluster answers.

    A cluster that is down does not stop the process: the proxy answers 503 until it returns,
    and the indices are created on first use (``Services.ensure_indices``).
    """
    from workbench.store.bootstrap import ensure_indices
    from workbench.store.client import make_client

    try:
        created = ensure_indices(make_client(config), config.index_mappings_dir)
    except Exception as exc:  # noqa: BLE001 - any failure: leave it to first use
        log.warning(
            "could not create system indices on %s (%s); will retry on first use",
            config.opensearch_url_safe, type(exc).__name__,
        )
        return
    if created:
        log.info("created system indices: %s", ", ".join(created))


def _load_demo(config: Config, args: argparse.Namespace) -> int:
    from workbench.demo.load import PRODUCTS, UBI, load_demo

    # the command prints what it wrote, index by index: the store's "created index" lines
    # would only repeat it, with a timestamp, in the user's terminal
    logging.getLogger("workbench.store.bootstrap").setLevel(logging.WARNING)
    products, ubi = args.products, args.ubi
    if not products and not ubi:  # the data shipped with the package
        products, ubi = str(PRODUCTS), str(UBI)
    report = load_demo(config, products, args.products_index, ubi)
    for index, count in report.items():
        print(f"{index}: {count} documents")
    return 0


def _bench(argv: list[str]) -> int:
    """Run the benchmarks (``workbench/bench/run.py``; installed with the package)."""
    from workbench.bench.run import main as bench_main

    return bench_main(argv)


def _show_config(config: Config, args: argparse.Namespace) -> int:
    from dataclasses import fields

    from workbench.config import markdown_table

    if args.markdown:
        print(markdown_table())
        return 0
    safe = config.safe_items()
    for f in fields(config):
        print(f"{f.metadata['env']}={'' if safe[f.name] is None else safe[f.name]}")
    return 0


def _status(config: Config, _: argparse.Namespace) -> int:
    from workbench.cli.health import check_all

    ok = True
    for name, (healthy, detail) in check_all(config).items():
        ok &= healthy
        print(f"{name:<10} {'ok' if healthy else 'DOWN':<5} {detail}")
    return 0 if ok else 1
