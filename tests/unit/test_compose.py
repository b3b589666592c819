"""docker-compose.yml agrees with config.py: known variables, valid values, wired services."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from workbench.config import Config, settings_table

REPO = Path(__file__).resolve().parents[2]


def compose() -> dict[str, Any]:
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())  # type: ignore[no-any-return]


def test_services_are_all_there() -> None:
    assert set(compose()["services"]) == {
        "opensearch", "redis", "workbench-api", "worker", "workbench-scheduler",
        "dashboards",
    }


def test_workbench_environment_uses_only_known_settings_with_valid_values() -> None:
    known = {f.metadata["env"] for f in settings_table()}
    services = compose()["services"]
    for name in ("workbench-api", "worker", "workbench-scheduler"):
        environment = {k: str(v) for k, v in services[name]["environment"].items()}
        assert set(environment) <= known, set(environment) - known
        config = Config.from_env(environment, index_mappings_dir=str(REPO / "index_mappings"))
        assert config.opensearch_url == "http://opensearch:9200"
        assert config.redis_url == "redis://redis:6379/0"
        assert environment["WORKBENCH_INDEX_MAPPINGS_DIR"] == "/app/index_mappings"
    api = services["workbench-api"]
    port = Config.from_env({k: str(v) for k, v in api["environment"].items()},
                           index_mappings_dir=str(REPO / "index_mappings")).port
    assert f"{port}:{port}" in api["ports"]
    assert "workbench serve" in " ".join(api["command"])
    assert "workbench worker" in " ".join(services["worker"]["command"])
    assert "workbench scheduler" in " ".join(services["workbench-scheduler"]["command"])


def test_opensearch_is_3x_without_security_and_dashboards_points_at_the_workbench() -> None:
    services = compose()["services"]
    opensearch = services["opensearch"]
    assert ":${OPENSEARCH_VERSION:-3." in opensearch["image"]
    assert opensearch["environment"]["DISABLE_SECURITY_PLUGIN"] == "true"
    assert "9200:9200" in opensearch["ports"]
    dashboards = services["dashboards"]["environment"]
    api_port = services["workbench-api"]["environment"]["WORKBENCH_PORT"]
    assert dashboards["OPENSEARCH_HOSTS"] == f'["http://workbench-api:{api_port}"]'
    assert dashboards["DISABLE_SECURITY_DASHBOARDS_PLUGIN"] == "true"


def test_the_worker_scales_and_installs_take_turns() -> None:
    """``docker compose up --scale worker=N`` needs a service with no fixed name, host port or
    hostname; the containers share the mounted checkout, so their editable installs (which
    write there) run one at a time under a lock file in it."""
    services = compose()["services"]
    worker = services["worker"]
    assert not {"container_name", "ports", "hostname"} & set(worker)
    for name in ("workbench-api", "worker", "workbench-scheduler"):
        command = " ".join(services[name]["command"])
        assert command.startswith("sh -c flock /app/.compose-install.lock pip install"), command
    ignored = (REPO / ".gitignore").read_text().split()
    assert ".compose-install.lock" in ignored


def test_the_workbench_installs_at_the_locked_versions() -> None:
    """Each workbench container installs through scripts/requirements.lock (in the mounted
    checkout), as scripts/install.sh does, so compose runs what the tests ran against."""
    services = compose()["services"]
    assert (REPO / "scripts" / "requirements.lock").is_file()
    for name in ("workbench-api", "worker", "workbench-scheduler"):
        command = " ".join(services[name]["command"])
        install = command.split("&&")[0]
        assert "pip install -q -c scripts/requirements.lock -e ." in install, command
        assert services[name]["working_dir"] == "/app"
        assert ".:/app" in services[name]["volumes"]


def test_a_dead_workbench_process_comes_back() -> None:
    """A worker that exits (say on a Redis restart), the API or the scheduler is restarted,
    unless the user stopped it."""
    services = compose()["services"]
    for name in ("workbench-api", "worker", "workbench-scheduler"):
        assert services[name].get("restart") == "unless-stopped", name


def test_the_api_serves_behind_haproxy_from_debians_packages() -> None:
    """The API container installs Debian 12's haproxy (the version the front's tests run
    against) and requires it, so a failed install shows instead of serving without the front."""
    services = compose()["services"]
    api = services["workbench-api"]
    assert api["image"] == "python:3.11-slim-bookworm"
    assert api["environment"]["WORKBENCH_FRONT"] == "haproxy"
    command = " ".join(api["command"])
    assert "apt-get install -y -qq --no-install-recommends haproxy" in command
    assert command.index("haproxy") < command.index("exec workbench serve")
    for name in ("worker", "workbench-scheduler"):
        assert "WORKBENCH_FRONT" not in services[name]["environment"]
