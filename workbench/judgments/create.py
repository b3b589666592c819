"""Building the PROCESSING document of a ``PUT /judgments`` (docs/contract.md, "Judgments").

The body is checked by its schema (schemas/judgments.py) with the rules built here
(``judgment_rules``: stored query sets and configurations, prices, prompt rules, click models,
judges, imported ratings); what needs the whole valid body is checked here (existing judgments
to reuse, the UBI events index). Everything is checked before the job runs, so bad input is a
4xx with the contract's message and nothing is stored.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opensearchpy import OpenSearch

from workbench.errors import BadRequest
from workbench.judges import llm as llm_judge
from workbench.judges import registry
from workbench.judges.base import Judge, OptionError, Setup
from workbench.judges.registry import BrokenJudge, UnknownJudge
from workbench.judgments import imported, pooling
from workbench.judgments.llm import prompt as llm_prompt
from workbench.judgments.ubi import CLICK_MODELS
from workbench.llm.pricing import Pricing
from workbench.querysets.entries import read_entries
from workbench.schemas.configuration_list import ConfigurationIds
from workbench.schemas.judgment_fields import (
    LLM,
    QUERY_SET,
    REFERENCE,
    REMOTE_SEARCH_CONFIGURATION,
    SEARCH_CONFIGURATION,
    UBI,
    JudgmentRules,
)
from workbench.schemas.judgment_sources import DEFAULT_UBI_EVENTS_INDEX
from workbench.store import ubi_events
from workbench.store.indices import (
    JUDGMENT_INDEX,
    QUERY_SET_INDEX,
    REMOTE_CONFIG_INDEX,
    SEARCH_CONFIG_INDEX,
)
from workbench.store.repository import Repository, new_id, now_iso
from workbench.store.search_render import SAMPLE_TEXT, render

PriceOf = Callable[[str], Pricing | None]
_INDICES = {QUERY_SET: QUERY_SET_INDEX, SEARCH_CONFIGURATION: SEARCH_CONFIG_INDEX,
            REMOTE_SEARCH_CONFIGURATION: REMOTE_CONFIG_INDEX}


def _no_prices(_: str) -> Pricing | None:
    return None


def _judge(name: Any, options: dict[str, Any]) -> Judge:
    """A reference judge, built; a 400 for one unknown or that refuses its options."""
    choices = [judge for judge in registry.names() if judge != llm_judge.NAME]
    if name not in choices:
        # An LLM builds its lists with LLM_JUDGMENT, with the plugin's prompt and scale.
        raise BadRequest(str(UnknownJudge(name, choices)))
    try:
        return registry.create(name, Setup(options))
    except (UnknownJudge, OptionError, BrokenJudge) as exc:
        raise BadRequest(str(exc)) from exc


def _missing_references(query_set: dict[str, Any]) -> int:
    return sum(1 for entry in read_entries(query_set) if not entry.reference_answer)


def judgment_rules(client: OpenSearch, price_of: PriceOf = _no_prices) -> JudgmentRules:
    """What a judgment body's schema asks of the cluster and the domain. ``price_of`` gives a
    model's prices (a ``maxCost`` needs them). Stored entities are read once per request."""
    read: dict[tuple[str, str], dict[str, Any] | None] = {}

    def entity(label: str, entity_id: str) -> dict[str, Any] | None:
        if (label, entity_id) not in read:
            read[label, entity_id] = Repository(client, _INDICES[label]).get_source(entity_id)
        return read[label, entity_id]

    return JudgmentRules(
        entity=entity, price_of=price_of, template_error=llm_prompt.validate_template,
        rating_type_error=llm_prompt.validate_rating_type,
        default_template=llm_prompt.DEFAULT_TEMPLATE, default_rating_type=llm_prompt.SCORE0_1,
        click_models=CLICK_MODELS, judge=_judge, missing_references=_missing_references,
        imported_ratings=imported.build)


def _check_poolable(config_ids: ConfigurationIds, size: int, rules: JudgmentRules) -> None:
    """``expandCoverage`` pools hybrid sub-queries (judgments/pooling.py): every configuration
    must render a top-level ``hybrid`` query of at least two sub-queries, or a 400 names the
    first that does not."""
    if config_ids.remote:
        raise BadRequest(f"{pooling.FLAG} pools the hybrid sub-queries of local search "
                         f"configurations only: [{config_ids.remote[0]}] is a remote search "
                         "configuration")
    for config_id in config_ids:
        config = rules.entity(SEARCH_CONFIGURATION, config_id)
        assert config is not None  # the schema checked that it exists
        refused = pooling.refusal(config_id, render(config, SAMPLE_TEXT, size).body)
        if refused:
            raise BadRequest(refused)


def _llm_metadata(client: OpenSearch, fields: dict[str, Any],
                  rules: JudgmentRules) -> dict[str, Any]:
    if fields[pooling.FLAG]:
        _check_poolable(fields["searchConfigurationList"], fields["size"], rules)
    existing = fields["existingJudgments"]
    configs = fields["searchConfigurationList"]
    if existing:
        indices = _target_indices(configs, lambda c: rules.entity(
            REMOTE_SEARCH_CONFIGURATION if c in configs.remote else SEARCH_CONFIGURATION, c))
        for judgment_id in existing:
            _check_reusable(client, judgment_id, indices, fields["llmJudgmentRatingType"])
    metadata: dict[str, Any] = {
        key: fields[key] for key in ("modelId", "querySetId", "size", "tokenLimit",
                                     "contextFields", "ignoreFailure", "promptTemplate",
                                     "llmJudgmentRatingType")}
    metadata.update(configuration_fields(configs))
    if existing:
        metadata["existingJudgments"] = existing
    for flag in ("overwriteCache", "includeRationale", pooling.FLAG):
        if fields[flag]:
            metadata[flag] = True
    for budget in ("maxTokens", "maxCost"):
        if fields[budget] is not None:
            metadata[budget] = fields[budget]
    return metadata


def _check_reusable(client: OpenSearch, judgment_id: str, indices: list[str],
                    rating_type: str) -> None:
    """The plugin's rules for reusing a judgment's ratings (its pull request #528): it exists,
    records its configurations, rates on the same scale, and its target indices include all
    of the request's (ratings are matched by document id, so another index's would be wrong).
    The workbench also refuses a reference judgment (its own type, rated by no LLM)."""
    source = Repository(client, JUDGMENT_INDEX).get_source(judgment_id)
    if source is None:
        raise BadRequest(f"Existing judgment [{judgment_id}] does not exist")
    metadata = source.get("metadata") or {}
    config_ids = metadata.get("searchConfigurationList") or []
    if not config_ids:
        raise BadRequest(f"Existing judgment [{judgment_id}] does not record its target index "
                         "(no search configurations) and cannot be reused")
    their_type = metadata.get("llmJudgmentRatingType") or llm_prompt.SCORE0_1
    if their_type not in llm_prompt.RATING_TYPES:
        raise BadRequest(f"Existing judgment [{judgment_id}] records an unrecognized rating "
                         f"type [{their_type}] and cannot be reused")
    if their_type != rating_type:
        raise BadRequest(f"Existing judgment [{judgment_id}] uses rating type {their_type} and "
                         f"cannot be reused in a {rating_type} judgment; the rating scales are "
                         "not comparable")
    if source.get("type") != "LLM_JUDGMENT":
        raise BadRequest(f"Existing judgment [{judgment_id}] is of type {source.get('type')} "
                         "and cannot be reused; only LLM_JUDGMENT judgments can")
    their_remote = set(metadata.get("remoteSearchConfigurationIds") or [])
    theirs = _target_indices(config_ids, lambda c: Repository(
        client, REMOTE_CONFIG_INDEX if c in their_remote else SEARCH_CONFIG_INDEX).get_source(c))
    if not set(theirs).issuperset(indices):
        raise BadRequest(
            f"Existing judgment [{judgment_id}] was generated for a different target index and "
            f"cannot be reused. Requested index(es): [{', '.join(indices)}], existing judgment "
            f"index(es): [{', '.join(theirs)}]")


def _target_indices(config_ids: list[Any],
                    read: Callable[[str], dict[str, Any] | None]) -> list[str]:
    """The sorted indices of these configurations; the plugin's 400 for one without any. (The
    plugin's "Cannot determine the target index for this judgment" cannot arise here: an
    LLM judgment's ``searchConfigurationList`` is never empty.) A remote search configuration's
    target is its ``connectionUrl`` (issue 47): ratings by its ids are reused only for the
    same remote search."""
    indices = set()
    for config_id in config_ids:
        config = read(str(config_id))
        if config is not None and not config.get("index") and config.get("connectionUrl"):
            indices.add(str(config["connectionUrl"]))
            continue
        if config is None or not config.get("index"):
            raise BadRequest(f"Search configuration [{config_id}] could not be resolved to a "
                             "target index")
        indices.add(str(config["index"]))
    return sorted(indices)


def configuration_fields(configs: ConfigurationIds) -> dict[str, Any]:
    """``searchConfigurationList`` as stored (the ids) and, when some are remote search
    configurations (issue 47), ``remoteSearchConfigurationIds``."""
    fields: dict[str, Any] = {"searchConfigurationList": list(configs)}
    if configs.remote:
        fields["remoteSearchConfigurationIds"] = list(configs.remote)
    return fields


def _ubi_metadata(client: OpenSearch, fields: dict[str, Any]) -> dict[str, Any]:
    """Refused before anything is written when the events index is missing or lacks the UBI
    fields, with the plugin's two messages (its pull request #558), one for an index the body
    names and one for the default. An alias or pattern that resolves to indices is accepted."""
    given = fields["ubiEventsIndex"]
    index = given or DEFAULT_UBI_EVENTS_INDEX
    if ubi_events.missing_fields(client, index) != []:
        raise BadRequest(ubi_events.unusable_index_message(index, given is not None))
    return {**{key: fields[key] for key in ("clickModel", "maxRank", "startDate", "endDate")},
            "ubiEventsIndex": index}


def _reference_metadata(fields: dict[str, Any]) -> dict[str, Any]:
    choice = fields["judge"]
    out: dict[str, Any] = {"judge": choice.name}
    threshold = getattr(choice.judge, "threshold", None)
    if isinstance(threshold, (int, float)) and not isinstance(threshold, bool):
        out["threshold"] = float(threshold)
    options = {k: v for k, v in choice.options.items() if k != "threshold"}
    if options:
        out["judgeOptions"] = options
    return {**out, "querySetId": fields["querySetId"],
            **configuration_fields(fields["searchConfigurationList"]),
            "size": fields["size"], "contextFields": fields["contextFields"]}


def new_judgment(client: OpenSearch, fields: dict[str, Any], rules: JudgmentRules,
                 judgment_id: str | None = None) -> dict[str, Any]:
    """The PROCESSING document for a body its schema loaded (``fields``, with the same
    ``rules``); raises a 4xx for what only the whole body can tell. ``judgment_id`` is the id
    the create chose (api/creates.py), a new one when None."""
    judgment_type = fields["type"]
    if judgment_type == LLM:
        metadata = _llm_metadata(client, fields, rules)
    elif judgment_type == UBI:
        metadata = _ubi_metadata(client, fields)
    elif judgment_type == REFERENCE:
        metadata = _reference_metadata(fields)
    else:
        metadata = {"judgmentRatings": fields["judgmentRatings"]}
    return {
        "id": judgment_id or new_id(),
        "timestamp": now_iso(),
        "name": fields["name"],
        "status": "PROCESSING",
        "type": judgment_type,
        "metadata": metadata,
        "judgmentRatings": [],
    }
