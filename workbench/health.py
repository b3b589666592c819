"""Reachability of the cluster, the broker and the workers, for ``workbench status``."""

from __future__ import annotations

from workbench.config import Config, redact_url


def check_all(config: Config) -> dict[str, tuple[bool, str]]:
    return {
        "opensearch": _opensearch(config),
        "redis": _redis(config),
        "workers": _workers(config),
    }


def _opensearch(config: Config) -> tuple[bool, str]:
    from workbench.store.client import make_client

    try:
        info = make_client(config).info()
    except Exception as exc:  # noqa: BLE001
        return False, f"{config.opensearch_url_safe}: {type(exc).__name__}"
    return True, f"{config.opensearch_url_safe} (OpenSearch {info['version']['number']})"


def _redis(config: Config) -> tuple[bool, str]:
    import redis

    try:
        redis.Redis.from_url(config.redis_url, socket_timeout=3).ping()
    except Exception as exc:  # noqa: BLE001
        return False, f"{redact_url(config.redis_url)}: {type(exc).__name__}"
    return True, redact_url(config.redis_url)


def _workers(config: Config) -> tuple[bool, str]:
    from workbench.jobs.celery_app import configure

    try:
        replies = configure(config).control.ping(timeout=2.0)
    except Exception as exc:  # noqa: BLE001
        return False, type(exc).__name__
    names = sorted(name for reply in replies for name in reply)
    return bool(names), ", ".join(names) if names else "no worker answered"
