"""REDIS_URL as one Redis or as Redis Sentinels (kombu's form), and the clients made from it."""

from __future__ import annotations

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from redis.sentinel import SentinelConnectionPool

from workbench.config import Config, ConfigError, redact_url, sentinels
from workbench.jobs.celery_app import transport_options
from workbench.redis_client import connect, connect_url, primary_address

THREE = "sentinel://:s3cret@10.0.0.1:26379/2;sentinel://10.0.0.2:26380;sentinel://h3:26381"


def sentinel_config(url: str = THREE, **extra: str) -> Config:
    return Config.from_env({"REDIS_URL": url, "WORKBENCH_REDIS_MASTER_NAME": "wb", **extra})


def test_a_list_of_sentinels_is_read_as_kombu_reads_it() -> None:
    found = sentinels(THREE)
    assert found.nodes == (("10.0.0.1", 26379), ("10.0.0.2", 26380), ("h3", 26381))
    assert (found.db, found.username, found.password) == (2, None, "s3cret")
    one = sentinels("sentinel://u:p%40ss@Host:1")
    assert (one.nodes, one.db, one.username, one.password) == ((("host", 1),), 0, "u", "p@ss")
    # later entries may repeat the first entry's database and credentials
    assert sentinels("sentinel://:pw@a:1/3;sentinel://:pw@b:2/3").db == 3


def test_one_redis_stays_as_it_was() -> None:
    config = Config.from_env({"REDIS_URL": "rediss://:pw@cache.example:6380/1"})
    assert config.redis_url == "rediss://:pw@cache.example:6380/1"
    assert config.redis_master_name is None


@pytest.mark.parametrize("raw, message", [
    ("sentinel://h1", "REDIS_URL: 'sentinel://h1' has no port: give each sentinel's port "
                      "(sentinels usually listen on 26379)"),
    ("sentinel://h1:26379;", "REDIS_URL: entry 2 is empty: separate sentinels with single "
                             "semicolons, as in sentinel://h1:26379;sentinel://h2:26379"),
    ("sentinel://h1:26379;;sentinel://h2:26379",
     "REDIS_URL: entry 2 is empty: separate sentinels with single semicolons, as in "
     "sentinel://h1:26379;sentinel://h2:26379"),
    ("sentinel://h1:26379;redis://:pw@h2:6379",
     "REDIS_URL: entry 2 ('redis://h2:6379') is not a sentinel URL such as "
     "sentinel://host:26379: every entry of a list of sentinels starts with sentinel://"),
    ("sentinel://:pw@h1:port", "REDIS_URL: 'sentinel://h1:port' has a port that is not a "
                               "number from 0 to 65535"),
    ("sentinel://:26379", "REDIS_URL: 'sentinel://:26379' has no host"),
    ("sentinel://h1:26379/zero", "REDIS_URL: 'sentinel://h1:26379/zero' names the database "
                                 "'zero'; a database is a number, as in "
                                 "sentinel://host:26379/0"),
    ("sentinel://h1:26379?ssl=true", "REDIS_URL: 'sentinel://h1:26379?ssl=true' has a query "
                                     "or fragment; a sentinel entry has neither"),
    ("sentinel://h1:26379;sentinel://H1:26379", "REDIS_URL: entry 2 ('sentinel://H1:26379') "
                                                "names a sentinel already listed"),
    ("sentinel://:a@h1:1;sentinel://:b@h2:2",
     "REDIS_URL: entry 2 ('sentinel://h2:2') gives another database or other credentials than "
     "entry 1: the master's database and credentials are read from entry 1"),
    ("sentinel://h1:1/0;sentinel://h2:2/1",
     "REDIS_URL: entry 2 ('sentinel://h2:2/1') gives another database or other credentials "
     "than entry 1: the master's database and credentials are read from entry 1"),
])
def test_a_bad_list_of_sentinels_is_refused_naming_the_entry(raw: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        sentinel_config(raw)
    assert str(caught.value) == message
    assert ":pw@" not in message and ":a@" not in message


def test_the_broker_url_is_checked_the_same_way() -> None:
    with pytest.raises(ConfigError) as caught:
        Config.from_env({"CELERY_BROKER_URL": "sentinel://b1", "WORKBENCH_REDIS_MASTER_NAME": "m"})
    assert str(caught.value) == ("CELERY_BROKER_URL: 'sentinel://b1' has no port: give each "
                                 "sentinel's port (sentinels usually listen on 26379)")


def test_sentinels_need_the_master_name_and_only_they_take_one() -> None:
    with pytest.raises(ConfigError) as caught:
        Config.from_env({"REDIS_URL": "sentinel://h1:26379"})
    assert str(caught.value) == (
        "WORKBENCH_REDIS_MASTER_NAME: REDIS_URL names Redis Sentinels (sentinel://); give the "
        "name they know the primary by (the name in their `sentinel monitor` line)")
    with pytest.raises(ConfigError) as caught:
        Config.from_env({"CELERY_BROKER_URL": "sentinel://h1:26379"})
    assert str(caught.value).startswith("WORKBENCH_REDIS_MASTER_NAME: CELERY_BROKER_URL names")
    with pytest.raises(ConfigError) as caught:
        Config.from_env({"REDIS_URL": "redis://h:6379/0", "WORKBENCH_REDIS_MASTER_NAME": "wb"})
    assert str(caught.value) == (
        "WORKBENCH_REDIS_MASTER_NAME: set, but neither REDIS_URL nor CELERY_BROKER_URL is a "
        "sentinel:// URL; without sentinels there is no master name to give")


def test_credentials_of_every_entry_never_show() -> None:
    url = "sentinel://:pw1@h1:1/0;sentinel://:pw1@h2:2/0"
    assert redact_url(url) == "sentinel://h1:1/0;sentinel://h2:2/0"
    config = sentinel_config(url, WORKBENCH_REDIS_SENTINEL_PASSWORD="pw2")
    shown = repr(config) + str(config.safe_items())
    assert "pw1" not in shown and "pw2" not in shown


def test_one_redis_gets_a_plain_client_with_the_callers_timeouts() -> None:
    client = connect(Config.from_env({}), socket_timeout=3, socket_connect_timeout=2)
    assert type(client.connection_pool) is redis.ConnectionPool
    kwargs = client.connection_pool.connection_kwargs
    assert (kwargs["host"], kwargs["port"], kwargs["db"]) == ("localhost", 6379, 0)
    assert (kwargs["socket_timeout"], kwargs["socket_connect_timeout"]) == (3, 2)


def test_sentinels_give_a_client_of_the_primary_they_name() -> None:
    config = sentinel_config(WORKBENCH_REDIS_SENTINEL_PASSWORD="guard")
    client = connect(config, socket_timeout=3, socket_connect_timeout=2)
    pool = client.connection_pool
    assert isinstance(pool, SentinelConnectionPool)
    assert pool.service_name == "wb" and pool.is_master
    kwargs = pool.connection_kwargs
    assert (kwargs["db"], kwargs["password"]) == (2, "s3cret")
    assert (kwargs["socket_timeout"], kwargs["socket_connect_timeout"]) == (3, 2)
    watchers = pool.sentinel_manager.sentinels
    assert [(s.connection_pool.connection_kwargs["host"], s.connection_pool.connection_kwargs[
        "port"]) for s in watchers] == [("10.0.0.1", 26379), ("10.0.0.2", 26380), ("h3", 26381)]
    for watcher in watchers:  # the sentinels' own password and the same timeouts, not the primary's
        kwargs = watcher.connection_pool.connection_kwargs
        assert (kwargs["password"], kwargs["socket_timeout"]) == ("guard", 3)


def test_no_sentinel_answering_is_a_redis_connection_error() -> None:
    client = connect_url("sentinel://127.0.0.1:1;sentinel://127.0.0.1:2", master_name="wb",
                         socket_timeout=1, socket_connect_timeout=1,
                         retry=Retry(NoBackoff(), 0))  # redis-py's default backs off for 7 s
    with pytest.raises(redis.ConnectionError):  # MasterNotFoundError: the callers' outage path
        client.ping()
    with pytest.raises(ValueError, match="WORKBENCH_REDIS_MASTER_NAME"):
        connect_url("sentinel://127.0.0.1:1", socket_timeout=1)


def test_the_broker_goes_through_kombus_sentinel_transport() -> None:
    plain = transport_options(Config.from_env({}))
    assert "master_name" not in plain and "sentinel_kwargs" not in plain
    options = transport_options(sentinel_config(WORKBENCH_REDIS_SENTINEL_PASSWORD="guard"))
    assert {k: options[k] for k in plain} == plain  # the other options are kept
    assert options["master_name"] == "wb"
    assert options["sentinel_kwargs"] == {"password": "guard", "socket_timeout": 10,
                                          "socket_connect_timeout": 5}
    broker_only = Config.from_env({"CELERY_BROKER_URL": "sentinel://b:26379",
                                   "WORKBENCH_REDIS_MASTER_NAME": "wb"})
    assert broker_only.redis_url == "redis://localhost:6379/0"
    assert transport_options(broker_only)["master_name"] == "wb"


def test_only_a_client_of_sentinels_names_a_primary() -> None:
    assert primary_address(connect(Config.from_env({}), socket_timeout=1)) is None
