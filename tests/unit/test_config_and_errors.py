"""Settings parsing, credential redaction and the error envelope."""

from __future__ import annotations

import logging

import pytest

from workbench.config import Config, ConfigError, redact_url, settings_table
from workbench.errors import BadRequest, NotFound, envelope, snake_case
from workbench.telemetry.logs import RedactingFilter, redact


def test_defaults_without_environment() -> None:
    config = Config.from_env({})
    assert config.opensearch_url == "http://localhost:9200"
    assert config.redis_url == "redis://localhost:6379/0"
    assert config.celery_broker_url == config.redis_url
    assert config.max_request_bytes == 100 * 1024 * 1024
    assert config.port == 9400


def test_every_setting_has_an_env_variable_and_help() -> None:
    envs = [f.metadata["env"] for f in settings_table()]
    assert len(envs) == len(set(envs))
    for f in settings_table():
        assert f.metadata["help"].endswith(".")
    assert "OPENSEARCH_URL" in envs and "REDIS_URL" in envs


def test_values_are_parsed_from_the_environment() -> None:
    config = Config.from_env({
        "OPENSEARCH_URL": "https://search.example:9201/",
        "OPENSEARCH_VERIFY_CERTS": "false",
        "WORKBENCH_PORT": "8080",
        "WORKBENCH_MAX_REQUEST_BYTES": "1024",
        "CELERY_BROKER_URL": "redis://broker:6379/1",
    })
    assert config.opensearch_url == "https://search.example:9201"
    assert config.opensearch_verify_certs is False
    assert config.port == 8080
    assert config.max_request_bytes == 1024
    assert config.celery_broker_url == "redis://broker:6379/1"


@pytest.mark.parametrize("env, variable", [
    ({"WORKBENCH_PORT": "70000"}, "WORKBENCH_PORT"),
    ({"WORKBENCH_WEB_WORKERS": "0"}, "WORKBENCH_WEB_WORKERS"),
    ({"OPENSEARCH_VERIFY_CERTS": "maybe"}, "OPENSEARCH_VERIFY_CERTS"),
    ({"OPENSEARCH_URL": "localhost"}, "OPENSEARCH_URL"),
    ({"WORKBENCH_LOG_LEVEL": "LOUD"}, "WORKBENCH_LOG_LEVEL"),
])
def test_bad_values_name_the_variable(env: dict[str, str], variable: str) -> None:
    with pytest.raises(ConfigError, match=variable):
        Config.from_env(env)


def test_credentials_never_show() -> None:
    config = Config.from_env({
        "OPENSEARCH_URL": "http://admin:hunter2@es:9200",
        "REDIS_URL": "redis://:redispw@cache:6379/0",
    })
    text = repr(config)
    assert "hunter2" not in text and "redispw" not in text
    assert config.opensearch_nodes == ("http://es:9200",)
    assert config.opensearch_auth == ("admin", "hunter2")
    assert redact_url("redis://:pw@h:1/0") == "redis://h:1/0"
    explicit = Config.from_env({"OPENSEARCH_USERNAME": "u", "OPENSEARCH_PASSWORD": "p"})
    assert explicit.opensearch_auth == ("u", "p")
    assert "'p'" not in repr(explicit)


def test_several_nodes_of_one_cluster() -> None:
    config = Config.from_env({"OPENSEARCH_URL": " https://u:pw@es1:9200/, https://u:pw@ES2:9201 "})
    assert config.opensearch_nodes == ("https://es1:9200", "https://ES2:9201")
    assert config.opensearch_auth == ("u", "pw") and config.opensearch_scheme == "https"
    assert config.opensearch_url_safe == "https://es1:9200, https://ES2:9201"
    shown = repr(config)
    assert "pw" not in shown and "https://es1:9200,https://ES2:9201" in shown


@pytest.mark.parametrize("raw, message", [
    ("http://a:9200,", "OPENSEARCH_URL: entry 2 is empty: separate node URLs with single commas"),
    ("http://a:9200,,http://b:9200",
     "OPENSEARCH_URL: entry 2 is empty: separate node URLs with single commas"),
    ("http://a:9200,b:9200",
     "OPENSEARCH_URL: entry 2 ('b:9200') is not a node URL such as http://localhost:9200"),
    ("http://u:secret@a:9200,http://u:secret@b:92x0",
     "OPENSEARCH_URL: entry 2 ('http://b:92x0') has a port that is not a number from 0 to "
     "65535"),
    ("http://a:9501,http://b:99999",
     "OPENSEARCH_URL: entry 2 ('http://b:99999') has a port that is not a number from 0 to "
     "65535"),
    ("http://a:9200,https://b:9200",
     "OPENSEARCH_URL: entry 2 ('https://b:9200') uses https where entry 1 uses http: the nodes "
     "of one cluster share a scheme"),
    ("http://a:9200/os,http://b:9200",
     "OPENSEARCH_URL: entry 2 ('http://b:9200') has the path '/' where entry 1 has '/os': the "
     "nodes share one path"),
    ("http://u:p@a:9200,http://v:p@b:9200",
     "OPENSEARCH_URL: entry 2 ('http://b:9200') has other credentials than entry 1: give one "
     "set, in every entry alike or in OPENSEARCH_USERNAME/OPENSEARCH_PASSWORD"),
    ("http://a:9200,http://A:9200",
     "OPENSEARCH_URL: entry 2 ('http://A:9200') names a node already listed"),
    ("http://a:9200;http://b:9200",
     "OPENSEARCH_URL: 'http://a:9200;http://b:9200' is not one node URL: separate the nodes "
     "with commas, not semicolons"),
    ("http://a;http://b",
     "OPENSEARCH_URL: 'http://a;http://b' is not one node URL: separate the nodes with commas, "
     "not semicolons"),
    ("http://u:secret@a:9200; http://u:secret@b:9200",
     "OPENSEARCH_URL: 'http://a:9200; http://b:9200' is not one node URL: separate the nodes "
     "with commas, not semicolons"),
    ("http://a:9200 http://b:9200",
     "OPENSEARCH_URL: 'http://a:9200 http://b:9200' is not one node URL: separate the nodes "
     "with commas, not spaces"),
    ("http://c:9200,http://a:9200 http://b:9200",
     "OPENSEARCH_URL: entry 2 ('http://a:9200 http://b:9200') is not one node URL: separate the "
     "nodes with commas, not spaces"),
    ("http://a:9200?x=1", "OPENSEARCH_URL: 'http://a:9200?x=1' has a query or fragment; a node "
                          "URL has neither"),
    ("", "OPENSEARCH_URL: expected a URL such as http://localhost:9200"),
])
def test_a_bad_node_list_is_refused_naming_the_entry(raw: str, message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        Config.from_env({"OPENSEARCH_URL": raw})
    assert str(refused.value) == message
    assert "secret" not in str(refused.value)


def test_log_filter_masks_credentials() -> None:
    assert redact("connecting to http://admin:hunter2@es:9200/x") == \
        "connecting to http://****@es:9200/x"
    assert "abc123" not in redact("headers {'Authorization': 'Basic abc123=='}")
    record = logging.LogRecord("t", logging.INFO, __file__, 1, "url %s", ("https://u:p@h/",),
                               None)
    RedactingFilter().filter(record)
    assert record.getMessage() == "url https://****@h/"


def test_envelope_shape() -> None:
    assert envelope(400, "illegal_argument_exception", "bad") == {
        "error": {
            "root_cause": [{"type": "illegal_argument_exception", "reason": "bad"}],
            "type": "illegal_argument_exception",
            "reason": "bad",
        },
        "status": 400,
    }
    assert NotFound("Document not found: x").body()["status"] == 404
    assert BadRequest("x").body()["error"]["type"] == "illegal_argument_exception"
    assert snake_case("IllegalArgumentException") == "illegal_argument_exception"
    assert snake_case("ValueError") == "value_error"


def test_the_documented_configuration_table_is_the_generated_one() -> None:
    from pathlib import Path

    from workbench.config import markdown_table

    page = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    assert markdown_table() in page


def test_the_front_is_not_used_where_it_cannot_verify_the_clusters_certificate() -> None:
    """The front checks upstream certificates against host names only: for a cluster reached
    over verified TLS at an IP address, auto serves with gunicorn alone and haproxy (or its old
    name nginx) is refused."""
    import pytest

    from workbench.config import Config, ConfigError
    from workbench.serving.front import chosen_front, find_haproxy

    by_ip = {"OPENSEARCH_URL": "https://127.0.0.1:9250"}
    assert chosen_front(Config.from_env({**by_ip, "WORKBENCH_FRONT": "auto"})) is None
    for name in ("haproxy", "nginx"):
        with pytest.raises(ConfigError, match="cannot verify the TLS certificate"):
            chosen_front(Config.from_env({**by_ip, "WORKBENCH_FRONT": name}))
    unverified = {**by_ip, "OPENSEARCH_VERIFY_CERTS": "false", "WORKBENCH_FRONT": "auto"}
    assert chosen_front(Config.from_env(unverified)) == find_haproxy()
    by_name = {"OPENSEARCH_URL": "https://localhost:9250", "WORKBENCH_FRONT": "auto"}
    assert chosen_front(Config.from_env(by_name)) == find_haproxy()
