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
    from workbench import redis_client

    try:
        client = redis_client.connect(config, socket_timeout=3)
        client.ping()
    except Exception as exc:  # noqa: BLE001
        return False, f"{redact_url(config.redis_url)}: {type(exc).__name__}"
    primary = redis_client.primary_address(client)
    return True, redact_url(config.redis_url) + (f" (primary {primary})" if primary else "")


def _workers(config: Config) -> tuple[bool, str]:
    """The workers that answer a ping, and every supervised one whose consumer keeps dying
    (``jobs.supervisor``): that one makes the line DOWN even while its consumer answers."""
    from workbench.jobs.celery_app import configure

    try:
        replies = configure(config).control.ping(timeout=2.0)
    except Exception as exc:  # noqa: BLE001
        return False, type(exc).__name__
    names = sorted(name for reply in replies for name in reply)
    healthy = bool(names)
    details = [", ".join(names) if names else "no worker answered"]
    for line, dying in _supervised(config):
        healthy &= not dying
        details.append(line)
    return healthy, "; ".join(details)


def _supervised(config: Config) -> list[tuple[str, bool]]:
    """One line per supervised worker whose consumer stopped recently, and whether it keeps
    dying (``DYING_EXITS`` exits within ``RECENT_SECONDS``)."""
    import redis

    from workbench import redis_client
    from workbench.jobs import supervisor

    try:
        records = supervisor.read_all(redis_client.connect(config, socket_timeout=3))
    except redis.exceptions.RedisError:
        return []  # the redis line says so
    lines = []
    for record in records:
        exits = supervisor.recent_exits(record)
        if not exits:
            continue
        dying = len(exits) >= supervisor.DYING_EXITS
        what = "keeps dying" if dying else "was restarted"
        lines.append((f"the job consumer on {record['host']} (supervisor pid {record['pid']}, "
                      f"queue {record['queue']}) {what}: {len(exits)} exit(s) in the last "
                      f"{supervisor.RECENT_SECONDS // 60} min, last {exits[-1]['how']}", dying))
    return lines
