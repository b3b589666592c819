"""docker-compose.yml and kubernetes/ are what their runtimes accept and what the workbench reads.

The compose file is checked against the Compose Specification's JSON schema, as Docker Compose
loads it (the schema of the compose-go module, fetched once from the Go module proxy and kept
under ``$WORKBENCH_HOME``); the manifests against the Kubernetes API's schemas for the versions
docs/deployment.md names (bundled by ``kubernetes-validate``), strictly: an unknown field is an
error. Then what no schema knows: each setting is one of ``workbench/config.py``'s and parses,
every ``depends_on`` names a service, one image runs the API, the worker and the scheduler, no
secret value is written down, the probes ask a path the workbench answers itself, and the
worker's grace period is the same in both. Each check is also shown refusing a broken copy.
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import os
import re
import urllib.request
import zipfile
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from cryptography.fernet import Fernet

from workbench.api.openapi import PATH as OPENAPI_PATH
from workbench.bench.paths import workbench_home
from workbench.config import Config, ConfigError, settings_table

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker-compose.yml"
KUBERNETES = REPO / "kubernetes"

#: the Kubernetes API versions the manifests are validated against (docs/deployment.md)
KUBERNETES_VERSIONS = ("1.31.0", "1.37.0")
#: the compose-go release whose schema/compose-spec.json is the Compose Specification's schema,
#: and the SHA-256 of its module zip as the Go module proxy serves it
COMPOSE_GO = "v2.16.2"
COMPOSE_GO_ZIP_SHA256 = "75410c9723430b920592093014fc53641f6207e01b52c016c848ba62bf2da805"
WORKBENCH_SERVICES = {"workbench-api": "serve", "worker": "worker",
                      "workbench-scheduler": "scheduler"}
SECRET_SETTINGS = {f.metadata["env"] for f in settings_table() if f.metadata["secret"]}
KNOWN_SETTINGS = {f.metadata["env"] for f in settings_table()}
#: variables of the containers that are not workbench settings
OTHER_VARIABLES = {"MPLCONFIGDIR"}


# -- Docker Compose ---------------------------------------------------------------------------

def compose_schema() -> dict[str, Any]:
    """The Compose Specification's schema, from the compose-go module (cached)."""
    cached = workbench_home() / "cache" / "compose-go" / COMPOSE_GO / "compose-spec.json"
    if not cached.is_file():
        proxy = next((entry for entry in os.environ.get("GOPROXY", "").split(",")
                      if entry.startswith("http")), "https://proxy.golang.org")
        url = f"{proxy.rstrip('/')}/github.com/compose-spec/compose-go/v2/@v/{COMPOSE_GO}.zip"
        with urllib.request.urlopen(url, timeout=60) as answer:
            data = answer.read()
        assert hashlib.sha256(data).hexdigest() == COMPOSE_GO_ZIP_SHA256, url
        member = f"github.com/compose-spec/compose-go/v2@{COMPOSE_GO}/schema/compose-spec.json"
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_suffix(f".{os.getpid()}")
        partial.write_bytes(zipfile.ZipFile(io.BytesIO(data)).read(member))
        partial.replace(cached)
    return json.loads(cached.read_text())


_VARIABLE = re.compile(r"\$\{(\w+)(?::?([-?])([^}]*))?\}")


def interpolate(value: Any, environ: dict[str, str]) -> Any:
    """Compose's ``${NAME}``, ``${NAME:-default}`` and ``${NAME:?message}`` over ``environ``."""
    if isinstance(value, dict):
        return {key: interpolate(item, environ) for key, item in value.items()}
    if isinstance(value, list):
        return [interpolate(item, environ) for item in value]
    if not isinstance(value, str):
        return value

    def one(match: re.Match[str]) -> str:
        name, kind, argument = match.groups()
        if environ.get(name):
            return environ[name]
        assert kind != "?", f"{name} is required: {argument}"
        return argument if kind == "-" else ""

    return _VARIABLE.sub(one, value)


def compose(environ: dict[str, str] | None = None) -> dict[str, Any]:
    """The compose file as Compose reads it: YAML merge keys resolved, variables interpolated
    (from ``environ``: none set by default, so the defaults apply)."""
    return interpolate(yaml.safe_load(COMPOSE.read_text()), environ or {})


def compose_problems(document: dict[str, Any]) -> list[str]:
    """What the schema cannot check: dependencies on services that exist, one image for the
    workbench's services (built by one of them), the commands, no secret value."""
    problems = []
    services = document["services"]
    for name, service in services.items():
        for dependency in service.get("depends_on") or {}:
            if dependency not in services:
                problems.append(f"{name} depends on {dependency}, which is not a service")
    images = {services[name].get("image") for name in WORKBENCH_SERVICES if name in services}
    if len(images) != 1 or None in images:
        problems.append("the workbench's services run more than one image: "
                        f"{sorted(map(str, images))}")
    builders = [name for name in WORKBENCH_SERVICES if "build" in services.get(name, {})]
    if len(builders) != 1:
        problems.append(f"the image should be built by one service, not {builders}")
    for name, command in WORKBENCH_SERVICES.items():
        if services.get(name, {}).get("command") != [command]:
            problems.append(f"{name} does not run `workbench {command}`")
    for name, service in services.items():
        for variable, value in (service.get("environment") or {}).items():
            if variable in SECRET_SETTINGS and not re.fullmatch(
                    rf"\$\{{{variable}(:?-)?\}}", str(value)):
                problems.append(f"{name} writes {variable} down instead of taking it from the "
                                "environment or .env")
    return problems


def test_the_compose_file_is_valid_against_the_compose_specification() -> None:
    schema = compose_schema()
    validator = jsonschema.validators.validator_for(schema)(schema)
    validator.validate(compose())
    validator.validate(compose({"OPENSEARCH_VERSION": "3.1.0", "BASE_IMAGE": "localhost/debian"}))


@pytest.mark.parametrize(("path", "value", "message"), [
    (("services", "worker", "stop_grace_period"), 150, "150 is not of type 'string'"),
    (("services", "worker", "restart_policy"), "always",
     "Unevaluated properties are not allowed ('restart_policy' was unexpected)"),
    (("services", "worker", "depends_on", "redis", "condition"), "service_ready",
     "'service_ready' is not one of ['service_started', 'service_healthy', "
     "'service_completed_successfully']"),
])
def test_the_schema_refuses_a_broken_compose_file(path: tuple[str, ...], value: Any,
                                                  message: str) -> None:
    broken = compose()
    parent = broken
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    schema = compose_schema()
    errors = list(jsonschema.validators.validator_for(schema)(schema).iter_errors(broken))
    assert errors
    assert message in leaf_messages(errors)


def leaf_messages(errors: list[jsonschema.ValidationError]) -> set[str]:
    """The messages of the innermost errors (a ``oneOf`` reports its branches' as context)."""
    messages: set[str] = set()
    for error in errors:
        messages |= leaf_messages(list(error.context)) if error.context else {error.message}
    return messages


def test_what_the_schema_cannot_check_holds() -> None:
    # the secrets are checked on the file as written, before interpolation
    assert compose_problems(yaml.safe_load(COMPOSE.read_text())) == []


def test_what_the_schema_cannot_check_is_caught_when_broken() -> None:
    broken = yaml.safe_load(COMPOSE.read_text())
    services = broken["services"]
    services["dashboards"]["depends_on"] = {"workbench": {"condition": "service_healthy"}}
    services["worker"]["image"] = "python:3.11-slim-bookworm"
    services["workbench-scheduler"]["build"] = "."
    services["worker"]["command"] = ["serve"]
    services["workbench-api"]["environment"]["WORKBENCH_SECRET_KEY"] = Fernet.generate_key()
    assert compose_problems(broken) == [
        "dashboards depends on workbench, which is not a service",
        "the workbench's services run more than one image: "
        "['python:3.11-slim-bookworm', 'workbench:local']",
        "the image should be built by one service, not ['workbench-api', "
        "'workbench-scheduler']",
        "worker does not run `workbench worker`",
        "workbench-api writes WORKBENCH_SECRET_KEY down instead of taking it from the "
        "environment or .env",
    ]


def test_the_image_is_built_from_the_dockerfile_on_the_default_base() -> None:
    services = compose()["services"]
    build = services["workbench-api"]["build"]
    assert (build["context"], build["dockerfile"]) == (".", "Dockerfile")
    assert build["args"] == {"BASE_IMAGE": "python:3.11-slim-bookworm"}
    assert services["workbench-api"]["image"] == "workbench:local"
    given = compose({"BASE_IMAGE": "localhost/workbench-base:bookworm"})
    assert given["services"]["workbench-api"]["build"]["args"]["BASE_IMAGE"] == \
        "localhost/workbench-base:bookworm"
    dockerfile = REPO / "Dockerfile"
    if not dockerfile.is_file():
        pytest.skip("no Dockerfile in this checkout yet")
    assert "ARG BASE_IMAGE=python:3.11-slim-bookworm" in dockerfile.read_text().splitlines()


def test_the_workbench_settings_are_known_and_parse() -> None:
    services = compose()["services"]
    for name in WORKBENCH_SERVICES:
        environment = {key: str(value) for key, value in services[name]["environment"].items()}
        assert set(environment) <= KNOWN_SETTINGS, set(environment) - KNOWN_SETTINGS
        config = Config.from_env(environment, index_mappings_dir=str(REPO / "index_mappings"))
        assert config.opensearch_url == "http://opensearch:9200"
        assert config.redis_url == "redis://redis:6379/0"
        assert config.secret_key is None  # unset in the environment: no key
    key = Fernet.generate_key().decode()
    given = compose({"WORKBENCH_SECRET_KEY": key})["services"]
    for name in WORKBENCH_SERVICES:
        assert given[name]["environment"]["WORKBENCH_SECRET_KEY"] == key


def test_the_services_wait_for_what_they_need_and_come_back() -> None:
    services = compose()["services"]
    assert set(services) == {"opensearch", "redis", *WORKBENCH_SERVICES, "dashboards"}
    for name in WORKBENCH_SERVICES:
        assert services[name]["depends_on"] == {
            "opensearch": {"condition": "service_healthy"},
            "redis": {"condition": "service_healthy"}}, name
    for name, service in services.items():
        assert service["restart"] == "unless-stopped", name
        for dependency in service.get("depends_on") or {}:
            if service["depends_on"][dependency]["condition"] == "service_healthy":
                assert "test" in services[dependency]["healthcheck"], (name, dependency)
    assert services["dashboards"]["depends_on"] == {
        "workbench-api": {"condition": "service_healthy"}}


def test_the_api_is_healthy_when_the_workbench_answers_itself() -> None:
    """The health check asks for the OpenAPI document, which the workbench answers without a
    call to the cluster, on the port it publishes; Dashboards is pointed there."""
    services = compose()["services"]
    api = services["workbench-api"]
    port = Config.from_env({k: str(v) for k, v in api["environment"].items()},
                           index_mappings_dir=str(REPO / "index_mappings")).port
    assert api["ports"] == [f"{port}:{port}"]
    assert f"'http://127.0.0.1:{port}{OPENAPI_PATH}'" in " ".join(api["healthcheck"]["test"])
    assert api["environment"]["WORKBENCH_FRONT"] == "haproxy"
    dashboards = services["dashboards"]["environment"]
    assert dashboards["OPENSEARCH_HOSTS"] == f'["http://workbench-api:{port}"]'
    assert dashboards["DISABLE_SECURITY_DASHBOARDS_PLUGIN"] == "true"
    opensearch = services["opensearch"]
    assert opensearch["image"] == "opensearchproject/opensearch:3.6.0"
    assert opensearch["environment"]["DISABLE_SECURITY_PLUGIN"] == "true"


def test_the_worker_scales_and_has_time_to_hand_its_jobs_over() -> None:
    """``--scale worker=N`` needs a service without a fixed name, host port or hostname; its
    stop grace period is the Kubernetes workers' termination grace period."""
    worker = compose()["services"]["worker"]
    assert not {"container_name", "ports", "hostname"} & set(worker)
    assert worker["stop_grace_period"] == f"{worker_grace_seconds()}s"


# -- Kubernetes -------------------------------------------------------------------------------

def manifests() -> dict[str, list[dict[str, Any]]]:
    """Every manifest file of kubernetes/ (kustomization.yaml aside) with its documents."""
    return {path.name: [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
            for path in sorted(KUBERNETES.glob("*.yaml")) if path.name != "kustomization.yaml"}


def resources() -> dict[tuple[str, str], dict[str, Any]]:
    return {(doc["kind"], doc["metadata"]["name"]): doc
            for docs in manifests().values() for doc in docs}


def deployments() -> dict[str, dict[str, Any]]:
    return {name: doc for (kind, name), doc in resources().items() if kind == "Deployment"}


def container(deployment: dict[str, Any]) -> dict[str, Any]:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def worker_grace_seconds() -> int:
    return deployments()["workbench-worker"]["spec"]["template"]["spec"][
        "terminationGracePeriodSeconds"]


def test_kustomization_lists_every_manifest() -> None:
    kustomization = yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text())
    assert kustomization["kind"] == "Kustomization"
    assert kustomization["resources"] == [
        "configmap.yaml", "secret.yaml", "api.yaml", "worker.yaml", "scheduler.yaml"]
    assert sorted(kustomization["resources"]) == sorted(manifests())


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_the_manifests_are_valid_for_the_kubernetes_api(version: str) -> None:
    validated = []
    for name, docs in manifests().items():
        for doc in docs:
            kubernetes_validate.validate(doc, version, strict=True)
            validated.append(f"{name}:{doc['kind']}")
    assert validated == [
        "api.yaml:Deployment", "api.yaml:Service", "configmap.yaml:ConfigMap",
        "scheduler.yaml:Deployment", "secret.yaml:Secret", "worker.yaml:Deployment",
        "worker.yaml:PodDisruptionBudget"]


def _broken(change: str) -> dict[str, Any]:
    worker = copy.deepcopy(deployments()["workbench-worker"])
    pod = worker["spec"]["template"]["spec"]
    if change == "misspelled field":
        pod["terminationGracePeriod"] = pod.pop("terminationGracePeriodSeconds")
    elif change == "wrong type":
        worker["spec"]["replicas"] = "two"
    elif change == "missing field":
        del pod["containers"]
    return worker


@pytest.mark.parametrize(("change", "message"), [
    ("misspelled field", "Additional properties are not allowed ('terminationGracePeriod' was "
                         "unexpected)"),
    ("wrong type", "'two' is not of type 'integer', 'null'"),
    ("missing field", "'containers' is a required property"),
])
def test_the_validator_refuses_a_broken_manifest(change: str, message: str) -> None:
    with pytest.raises(kubernetes_validate.ValidationError) as refused:
        kubernetes_validate.validate(_broken(change), KUBERNETES_VERSIONS[0], strict=True)
    assert refused.value.message == message


def test_the_validator_refuses_an_api_the_version_no_longer_serves() -> None:
    """policy/v1beta1 PodDisruptionBudgets were removed in Kubernetes 1.25."""
    budget = copy.deepcopy(resources()[("PodDisruptionBudget", "workbench-worker")])
    budget["apiVersion"] = "policy/v1beta1"
    with pytest.raises(kubernetes_validate.SchemaNotFoundError):
        kubernetes_validate.validate(budget, KUBERNETES_VERSIONS[0], strict=True)


def test_the_settings_are_the_workbenchs_and_the_secrets_stay_in_the_secret() -> None:
    settings = resources()[("ConfigMap", "workbench-settings")]["data"]
    secret = resources()[("Secret", "workbench-secrets")]
    assert set(settings) <= KNOWN_SETTINGS - SECRET_SETTINGS, set(settings)
    assert set(secret["stringData"]) <= KNOWN_SETTINGS, set(secret["stringData"])
    assert SECRET_SETTINGS & set(secret["stringData"]) == {
        "OPENSEARCH_PASSWORD", "WORKBENCH_SECRET_KEY"}
    assert "data" not in secret
    for name, value in secret["stringData"].items():
        if name in SECRET_SETTINGS or name == "REDIS_URL":
            assert "CHANGE-ME" in value, (name, "holds a value, not a placeholder")
    environment = {**settings, **secret["stringData"]}
    mappings = {"index_mappings_dir": str(REPO / "index_mappings")}
    # the placeholder key is refused: an example Secret applied unchanged does not start
    with pytest.raises(ConfigError, match=r"^WORKBENCH_SECRET_KEY: key 1 is not a Fernet key"):
        Config.from_env(environment, **mappings)
    config = Config.from_env(dict(environment, WORKBENCH_SECRET_KEY=Fernet.generate_key()
                                  .decode()), **mappings)
    assert config.redis_url == "redis://:CHANGE-ME@redis-master:6379/0"
    assert config.opensearch_url == "https://opensearch-cluster-master:9200"
    for deployment in deployments().values():
        spec = container(deployment)
        assert spec["envFrom"] == [{"configMapRef": {"name": "workbench-settings"}},
                                   {"secretRef": {"name": "workbench-secrets"}}]
        for variable in spec.get("env", []):
            assert variable["name"] in KNOWN_SETTINGS - SECRET_SETTINGS | OTHER_VARIABLES


def test_one_image_runs_each_command_as_the_unprivileged_user() -> None:
    commands = {}
    for name, deployment in deployments().items():
        pod = deployment["spec"]["template"]["spec"]
        spec = container(deployment)
        commands[name] = (spec["image"], spec["args"])
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["securityContext"]["runAsUser"] == 10001, name
        assert spec["securityContext"] == {"allowPrivilegeEscalation": False,
                                           "readOnlyRootFilesystem": True,
                                           "capabilities": {"drop": ["ALL"]}}, name
        # the one place the processes write (HAProxy's files, metric samples) is an emptyDir
        assert spec["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}], name
        assert [volume["name"] for volume in pod["volumes"] if "emptyDir" in volume] == ["tmp"]
        assert set(spec["resources"]) == {"requests", "limits"}, name
        for kind in ("cpu", "memory"):
            assert kind in spec["resources"]["requests"] and kind in spec["resources"]["limits"]
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items(), name
    assert commands == {"workbench-api": ("workbench:local", ["serve"]),
                        "workbench-worker": ("workbench:local", ["worker"]),
                        "workbench-scheduler": ("workbench:local", ["scheduler"])}


def test_the_api_probes_a_path_the_workbench_answers_itself() -> None:
    api = deployments()["workbench-api"]
    spec = container(api)
    assert spec["ports"] == [{"name": "http", "containerPort": 9400}]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert spec[probe]["httpGet"] == {"path": OPENAPI_PATH, "port": "http"}, probe
    service = resources()[("Service", "workbench")]
    assert service["spec"]["ports"] == [{"name": "http", "port": 9400, "targetPort": "http"}]
    labels = api["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()


def test_workers_scale_alone_and_leave_one_at_a_time() -> None:
    worker = deployments()["workbench-worker"]
    assert worker["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    budget = resources()[("PodDisruptionBudget", "workbench-worker")]
    assert budget["spec"]["maxUnavailable"] == 1
    assert budget["spec"]["selector"] == worker["spec"]["selector"]
    # the worker's own bound (WORKBENCH_WORKER_STOP_SECONDS, then 5 s for its supervisor) and a
    # margin, the same as compose's stop grace period
    settings = resources()[("ConfigMap", "workbench-settings")]["data"]
    stop_seconds = int(settings.get("WORKBENCH_WORKER_STOP_SECONDS",
                                    Config().worker_stop_seconds))
    assert worker_grace_seconds() == 45 >= stop_seconds + 5 + 15


def test_the_scheduler_runs_once() -> None:
    """Two schedulers would fire each schedule twice: one replica, never two during a rollout.
    (Its SIGTERM as PID 1: tests/integration/test_schedules.py.)"""
    scheduler = deployments()["workbench-scheduler"]
    assert scheduler["spec"]["replicas"] == 1
    assert scheduler["spec"]["strategy"] == {"type": "Recreate"}
