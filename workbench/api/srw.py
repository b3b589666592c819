"""The SRW route family: the ``/_plugins/_search_relevance`` blueprint, its gate (the caller's
identity, the plugin's ``workbench_enabled`` setting) and the registration of every entity's
blueprint under it. What the entity routes share is in ``api.entities``."""

from __future__ import annotations

from flask import Blueprint, Flask, g

from workbench.api import (
    SRW_PREFIX,
    ab_tests,
    caller,
    check_output_flags,
    evaluate,
    experiments,
    holes,
    judgment_estimate,
    judgments,
    models,
    monitors,
    query_sets,
    remote_search,
    schedules,
    search_configurations,
    services,
    stats,
    summary,
)
from workbench.errors import TextError
from workbench.store import generation
from workbench.store.plugin_settings import Stored

bp = Blueprint("srw", __name__, url_prefix=SRW_PREFIX)
bp.before_request(check_output_flags)  # first, as OpenSearch checks them before anything else


@bp.before_request
def workbench_gate() -> None:
    """Every SRW route acts as its caller (refused by a secured cluster as the cluster refuses
    it), then checks ``plugins.search_relevance.workbench_enabled``."""
    caller.bind_and_authenticate()
    svc = services()
    svc.ensure_indices()
    g.cache_generation = generation.read(svc.cache_redis)
    g.plugin_settings = svc.settings.current(g.cache_generation)
    refuse_if_disabled(g.plugin_settings)


def refuse_if_disabled(settings: Stored) -> None:
    """A disabled workbench answers every SRW route 403, in plain text as the plugin does."""
    if not settings.value("workbench_enabled"):
        raise TextError(403, "Search Relevance Workbench is disabled")


bp.teardown_request(caller.unbind)


def install(app: Flask) -> None:
    """Register the SRW blueprints (before the pass-through)."""
    if not bp._got_registered_once:  # nesting is fixed at the first app; later apps reuse it
        for child in (query_sets.bp, search_configurations.bp, judgments.bp,
                      judgment_estimate.bp, schedules.bp, experiments.bp, summary.bp,
                      evaluate.bp, stats.bp, models.bp, ab_tests.bp, holes.bp, monitors.bp,
                      remote_search.bp):
            bp.register_blueprint(child)
    app.register_blueprint(bp)
