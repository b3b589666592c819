"""The examples of the README and the documentation, run as a reader would run them, against
the real services (tests/support/doc_examples.py says how fences are read).

Every fenced example of README.md and docs/ runs, page by page, in one folder per page:

* ``console`` sessions command by command, each command's printed lines compared with what
  the page shows (as JSON, with the page's ``...`` abbreviations, when the page shows JSON);
* ``bash``/``sh`` fences as scripts that must succeed (``set -e``), ``python`` fences with the
  project's interpreter;
* shell variables a fence sets are there for the page's later fences, as in a reader's
  terminal (``EXPERIMENT=$(...)`` in one, ``$EXPERIMENT`` in the next);
* ``<!-- example: setup [SETTING=value ...] -->`` marks set-up of the machine itself
  (``./scripts/up.sh``, ``./scripts/test.sh``, ``./scripts/llama.sh start``), which CI runs as
  its own steps; settings given there are the settings of the services the page runs against
  (an API and a worker of its own are started with them);
* ``<!-- example: file NAME -->`` writes the fence's text to ``NAME`` for the commands to use;
* ``<!-- example: config KIND -->`` marks the configuration of another program, checked by
  ``CONFIG_CHECKS`` (what that program would do with it, done here);
* ``<!-- example: shown-by FILE::TEST -->`` marks an answer only a fault produces (a cluster
  that stops answering mid-write): the named test of the suite produces it and asserts it
  exactly; here the test must exist and the answer must read as the page's JSON;
* a picture the page shows (``![...](NAME.png)``) must be made by its examples
  (``scripts/doc_pictures.py``) and carry the figures of this run (``_check_pictures``).

The URLs the pages were recorded with (the workbench on ``localhost:9400``, the model server on
``127.0.0.1:9600``) are replaced with the test services'. ``test_count_of_examples`` prints how
many examples each page holds.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import tomllib
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from opensearchpy import OpenSearch

from tests.support.doc_examples import (
    REPO,
    Fence,
    documents,
    fences,
    json_mismatches,
    normalise,
    parse_pattern,
    shown_as_json,
)
from tests.support.processes import Server, Worker, stop_together
from workbench.store.indices import MODELS_INDEX

PAGES = [str(path.relative_to(REPO)) for path in documents()
         if any(f.language for f in fences(path))]
RECORDED_URLS = ("http://127.0.0.1:9400", "http://localhost:9400", "localhost:9400")
RECORDED_MODEL_SERVER = "http://127.0.0.1:9600/v1"
RECORDED_COLUMNS = "160"  # the width the pages' tables were recorded at
STATE = ".example-variables"  # where a page's shell variables wait for its next fence
MARKER = "@@example-step@@"
Services = tuple[dict[str, str], str]  # the environment and API URL a page runs against


def _session_dir(tmp_path: Path) -> Path:
    """A folder that looks like the checkout to the commands (``.venv``, ``workbench/``,
    ``scripts/``) without letting them write into it."""
    for name in (".venv", "workbench", "scripts", "index_mappings", "tests", "pyproject.toml"):
        (tmp_path / name).symlink_to(REPO / name)
    return tmp_path


def _shell(body: str, strict: bool) -> str:
    """``body`` in a shell that starts with the page's variables and leaves the ones it set."""
    return "\n".join([
        "__known=$(compgen -v | sort)",
        f"[ -f {STATE} ] && source {STATE}",
        "__save() { declare -p $(comm -13 <(echo \"$__known\") <(compgen -v | sort)"
        " | grep -v '^_') 2>/dev/null | grep -v '^declare -[a-zA-Z]*r' > " + STATE + "; }",
        "trap __save EXIT",
        "set -eo pipefail" if strict else "",
        body])


def _run(script: str, cwd: Path, env: dict[str, str], timeout: float = 900
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _compare(fence: Fence, command: str, shown: list[str], printed: list[str]) -> None:
    if shown_as_json(shown):
        text = "\n".join(normalise(printed))
        try:
            actual = json.loads(text)
        except ValueError:
            pytest.fail(f"{fence.where}: {command!r} printed no JSON:\n{text[-2000:]}")
        problems = json_mismatches(parse_pattern("\n".join(normalise(shown))), actual)
        assert not problems, (fence.where, command, problems, text[-3000:])
    else:
        assert normalise(printed) == normalise(shown), (
            f"{fence.where}: {command!r} printed (the page's output to record):\n"
            + "\n".join(printed))


def _console(fence: Fence, cwd: Path, env: dict[str, str], localise: Callable[[str], str]
             ) -> None:
    """Run a session's commands in one shell and compare each command's printed lines with
    the page's."""
    steps = fence.steps()
    script = "exec 2>&1\n" + "\n".join(
        f"{localise(step.command)}\n__status=$?; echo; echo \"{MARKER} $__status\""
        for step in steps)
    result = _run(_shell(script, strict=False), cwd, env)
    chunks = result.stdout.split(MARKER)
    assert len(chunks) == len(steps) + 1, (fence.where, result.stdout[-2000:],
                                           result.stderr[-2000:])
    for i, step in enumerate(steps):
        printed = chunks[i].split("\n")
        if i:  # drop the exit status that follows the previous marker
            status, printed = printed[0].strip(), printed[1:]
            assert status == "0", (fence.where, steps[i - 1].command, chunks[i - 1][-2000:])
        _compare(fence, step.command, step.output, printed[:-1])  # the echo's blank line
    assert chunks[-1].split("\n")[0].strip() == "0", (fence.where, steps[-1].command,
                                                      chunks[-2][-2000:])


def _check_dashboards(fence: Fence, localise: Callable[[str], str]) -> None:
    """OpenSearch Dashboards' ``opensearch.hosts``: each host answers ``GET /`` as a cluster
    does (name, version), which is the first thing Dashboards asks."""
    for host in yaml.safe_load(fence.text)["opensearch.hosts"]:
        with urllib.request.urlopen(localise(host) + "/", timeout=30) as answer:
            body = json.load(answer)
        assert body["version"]["distribution"] == "opensearch", (fence.where, body)


def _check_entry_point(fence: Fence, localise: Callable[[str], str]) -> None:
    """A ``pyproject.toml`` table registering a judge: the group is the one the workbench
    reads, and the value has the ``module:function`` form entry points need."""
    from importlib.metadata import EntryPoint

    from workbench.judges.registry import GROUP as ENTRY_POINT_GROUP

    table = tomllib.loads(fence.text)["project"]["entry-points"]
    assert list(table) == [ENTRY_POINT_GROUP], fence.where
    for name, value in table[ENTRY_POINT_GROUP].items():
        point = EntryPoint(name, value, ENTRY_POINT_GROUP)
        assert point.module and point.attr, (fence.where, value)


def _check_models(fence: Fence, localise: Callable[[str], str]) -> None:
    """A ``WORKBENCH_MODELS`` value: the workbench's configuration accepts it."""
    from workbench.config import Config
    from workbench.llm.registry import load_registry

    registry = load_registry(Config.from_env({"WORKBENCH_MODELS": fence.text}))
    assert [spec.id for spec in registry.specs()] == [m["id"] for m in json.loads(fence.text)]


def _check_security_api(fence: Fence, localise: Callable[[str], str]) -> None:
    """Security REST API requests as Dev Tools shows them (``METHOD path`` then a JSON body),
    sent to the secured node as ``admin``; each role they map must then be one of the user's
    roles (``authinfo``). The roles and mappings are removed afterwards, so the other
    security tests see the node as they set it up."""
    from tests.support.secure_cluster import secure_cluster

    cluster = secure_cluster()
    blocks = [block.strip().split("\n", 1) for block in fence.text.split("\n\n") if block.strip()]
    created: list[str] = []
    try:
        for head, body in blocks:
            method, path = head.split(" ", 1)
            reply = cluster.request(method, "/" + path.lstrip("/"), json.loads(body))
            assert reply.status in (200, 201), (fence.where, head, reply.data[:500])
            created.insert(0, "/" + path.lstrip("/"))
            if "/rolesmapping/" in path:
                role = path.rsplit("/", 1)[1]
                for user in json.loads(body).get("users", []):
                    info = json.loads(cluster.request("GET", "/_plugins/_security/authinfo",
                                                      user=user).data)
                    assert role in info["roles"], (fence.where, user, info["roles"])
    finally:
        for path in created:
            cluster.request("DELETE", path)


def _check_prometheus_scrape(fence: Fence, localise: Callable[[str], str]) -> None:
    """A Prometheus scrape job: each target's ``metrics_path`` answers the workbench's metrics
    (the page's services listen there)."""
    for job in yaml.safe_load(fence.text)["scrape_configs"]:
        for static in job["static_configs"]:
            for target in static["targets"]:
                url = f"http://{target}{job.get('metrics_path', '/metrics')}"
                with urllib.request.urlopen(url, timeout=30) as answer:
                    text = answer.read().decode()
                assert "workbench_jobs_queued" in text, (fence.where, url, text[:500])


def _check_prometheus_rules(fence: Fence, localise: Callable[[str], str]) -> None:
    """Alerting rules in Prometheus's rule-file shape, each over metrics the workbench exports
    (tests/unit/telemetry/test_metrics_page.py checks the names against the code), and, where
    Prometheus's ``promtool`` is installed, as Prometheus reads them (``promtool check rules``:
    the expressions parse, the templates expand)."""
    for group in yaml.safe_load(fence.text)["groups"]:
        assert group["name"] and group["rules"], fence.where
        for rule in group["rules"]:
            assert {"alert", "expr", "for", "labels", "annotations"} <= set(rule), rule
            assert re.search(r"workbench_\w+", rule["expr"]), rule
    promtool = shutil.which("promtool")  # scripts/install.sh --dev installs Debian's
    if promtool:
        with tempfile.NamedTemporaryFile("w", suffix=".yml") as rules:
            rules.write(fence.text)
            rules.flush()
            checked = subprocess.run([promtool, "check", "rules", rules.name],
                                     capture_output=True, text=True, timeout=60)
        count = sum(len(group["rules"]) for group in yaml.safe_load(fence.text)["groups"])
        assert checked.returncode == 0, (fence.where, checked.stdout, checked.stderr)
        assert f"SUCCESS: {count} rules found" in checked.stdout, (fence.where, checked.stdout)


CONFIG_CHECKS: dict[str, Callable[[Fence, Callable[[str], str]], None]] = {
    "dashboards": _check_dashboards, "entry-point": _check_entry_point, "models": _check_models,
    "security-api": _check_security_api, "prometheus-scrape": _check_prometheus_scrape,
    "prometheus-rules": _check_prometheus_rules}


def _settings(page: str, localise: Callable[[str], str]) -> dict[str, str]:
    """The settings a page's set-up fences give the services (``SETTING=value`` words after
    ``setup`` in the marker, quoted as in a shell)."""
    settings: dict[str, str] = {}
    for fence in fences(REPO / page):
        if fence.marker == "setup" and fence.argument:
            for item in shlex.split(fence.argument):
                name, _, value = item.partition("=")
                settings[name] = value
    return {key: localise(value) for key, value in settings.items()}


@pytest.fixture(scope="module")
def own_services(env: dict[str, str]) -> Iterator[Callable[[dict[str, str]], Services]]:
    """APIs and workers started with a page's settings, shared by pages with the same ones;
    each has a secret key, as ``scripts/up.sh`` generates one."""
    from cryptography.fernet import Fernet

    started: dict[str, tuple[dict[str, str], str]] = {}
    processes: list[Server | Worker] = []

    def start(settings: dict[str, str]) -> tuple[dict[str, str], str]:
        key = json.dumps(settings, sort_keys=True)
        if key not in started:
            own = dict(env, WORKBENCH_SECRET_KEY=Fernet.generate_key().decode(), **settings,
                       WORKBENCH_QUEUE=f"docs-{uuid.uuid4().hex[:8]}")
            api = Server(own)
            processes.extend([api, Worker(own)])
            started[key] = (own, api.url)
        return started[key]

    yield start
    stop_together(processes)


@pytest.mark.parametrize("page", PAGES)
def test_every_example_of_the_page_runs(
        page: str, env: dict[str, str], server: Server, worker: Worker,
        own_services: Callable[[dict[str, str]], Services], llama_url: str,
        direct: OpenSearch, tmp_path: Path) -> None:
    model_server = llama_url.removeprefix("http://").removesuffix("/v1")

    def localise_model_server(text: str) -> str:
        recorded = RECORDED_MODEL_SERVER.removeprefix("http://").removesuffix("/v1")
        escaped = json.dumps(re.escape(recorded))[1:-1]  # as a pattern in a JSON setting
        return (text.replace(recorded, model_server)
                .replace(escaped, json.dumps(re.escape(model_server))[1:-1]))

    settings = _settings(page, localise_model_server)
    env, url = own_services(settings) if settings else (env, server.url)

    def localise(text: str) -> str:
        for recorded in RECORDED_URLS:
            text = text.replace(recorded, url if recorded.startswith("http") else url[7:])
        return localise_model_server(text)

    # each page starts as on a fresh install: no model registered through the models route
    direct.delete_by_query(index=MODELS_INDEX, body={"query": {"match_all": {}}},
                           params={"refresh": "true", "conflicts": "proceed"}, ignore=[404])
    cwd = _session_dir(tmp_path)
    session_env = dict(env, WORKBENCH_URL=url, COLUMNS=RECORDED_COLUMNS,
                       PATH=f"{REPO / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    ran = 0
    for fence in fences(REPO / page):
        if not fence.language or fence.marker == "setup":
            continue
        if fence.marker == "file":
            (cwd / fence.argument).write_text(fence.text + "\n")
            continue
        if fence.marker == "config":
            CONFIG_CHECKS[fence.argument](fence, localise)
        elif fence.marker == "shown-by":
            path, _, test = fence.argument.partition("::")
            assert f"def {test}(" in (REPO / path).read_text(), (fence.where, fence.argument)
            parse_pattern(fence.text)
        elif fence.language == "console":
            _console(fence, cwd, session_env, localise)
        elif fence.language in ("bash", "sh"):
            result = _run(_shell(localise(fence.text), strict=True), cwd, session_env)
            assert result.returncode == 0, (fence.where, result.stdout[-2000:],
                                            result.stderr[-2000:])
        elif fence.language == "python":
            result = subprocess.run([str(REPO / ".venv" / "bin" / "python"), "-c",
                                     localise(fence.text)], cwd=cwd, env=session_env,
                                    capture_output=True, text=True, timeout=300)
            assert result.returncode == 0, (fence.where, result.stderr[-2000:])
        else:
            pytest.fail(f"{fence.where}: a ```{fence.language} fence must run or carry a "
                        "marker (tests/support/doc_examples.py)")
        ran += 1
    assert ran, f"{page} has no example to run"
    _check_pictures(page, cwd)


def _check_pictures(page: str, cwd: Path) -> None:
    """Every picture a page shows is made by the page's own examples (scripts/doc_pictures.py)
    and carries the figures of this run; with ``WORKBENCH_DOCS_PICTURES=write`` this run's
    pictures replace the page's (how they are refreshed after a change)."""
    from scripts.doc_pictures import read_facts

    for name in re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", (REPO / page).read_text()):
        made, shown = cwd / name, (REPO / page).parent / name
        assert made.is_file(), f"{page} shows {name}, which its examples do not make"
        facts = read_facts(made)
        assert facts, f"{name}: made without its figures (scripts/doc_pictures.py)"
        if os.environ.get("WORKBENCH_DOCS_PICTURES") == "write":
            shutil.copyfile(made, shown)
            continue
        assert read_facts(shown) == facts, (
            f"{page}: {name} shows the figures of another run than the page's; refresh it with "
            "WORKBENCH_DOCS_PICTURES=write ./scripts/test.sh "
            f"tests/integration/test_doc_examples.py -k '{page}'")


def test_count_of_examples() -> None:
    """How many fenced examples each page holds (printed with -s or in the log of a failure);
    every one runs but the machine's own set-up. A fence without a language is text (a
    diagram, a message quoted) and must not look like a command, which would escape the run."""
    total = setup = 0
    for path in documents():
        found = [f for f in fences(path) if f.language and f.marker != "file"]
        total += len(found)
        setup += sum(1 for f in found if f.marker == "setup")
        if found:
            print(f"{path.relative_to(REPO)}: {len(found)} fenced examples")
        for fence in fences(path):
            if not fence.language:
                assert not fence.text.lstrip().startswith(("$ ", "curl ", "workbench ",
                                                           "./scripts")), fence.where
    print(f"{total - setup} examples run of {total} fenced examples (the rest set up the "
          "machine)")
