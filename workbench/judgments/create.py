"""Checking a ``PUT /judgments`` body and building the PROCESSING document (docs/contract.md,
"Judgments").

Everything that can be checked before the job runs is checked here, so bad input is a 4xx with
the contract's message and nothing is stored.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from opensearchpy import OpenSearch

from workbench.errors import BadRequest, NotFound
from workbench.judges import llm as llm_judge
from workbench.judges import registry
from workbench.judges.base import OptionError, Setup
from workbench.judges.registry import BrokenJudge, UnknownJudge
from workbench.judgments import imported
from workbench.judgments.llm import prompt as llm_prompt
from workbench.judgments.ubi import CLICK_MODELS
from workbench.llm.pricing import Pricing
from workbench.querysets.entries import read_entries
from workbench.schemas.numbers import MAX_RESULT_WINDOW, bounded_int
from workbench.schemas.text import DESCRIPTION_LIMIT, NAME_LIMIT, text_error
from workbench.store import ubi_events
from workbench.store.indices import JUDGMENT_INDEX, QUERY_SET_INDEX, SEARCH_CONFIG_INDEX
from workbench.store.repository import Repository, new_id, now_iso

TYPES = ("LLM_JUDGMENT", "UBI_JUDGMENT", "IMPORT_JUDGMENT", "REFERENCE_JUDGMENT")
MAX_EXISTING = 5
MAX_BUDGET_TOKENS = 10**12
MAX_BUDGET_COST = 1e12
PriceOf = Callable[[str], Pricing | None]
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def _java_class(value: Any) -> str:
    """The simple class name Jackson would give a JSON value."""
    if isinstance(value, bool):
        return "Boolean"
    if isinstance(value, list):
        return "ArrayList"
    if isinstance(value, dict):
        return "LinkedHashMap"
    return type(value).__name__


def _string_list(body: dict[str, Any], field: str, required: bool = False) -> list[str]:
    value = body.get(field)
    if value is None:
        if required:
            raise BadRequest(f"{field} is required")
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BadRequest(f"{field} must be a list of strings")
    return list(value)


def _bool(body: dict[str, Any], field: str, default: bool) -> bool:
    value = body.get(field, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise BadRequest(f"{field} must be true or false")
    return value


def token_limit(raw: Any) -> int:
    if raw is None:
        return 4000
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        raise BadRequest("Invalid tokenLimit type. Expected numeric value or string, got: "
                         + _java_class(raw))
    if isinstance(raw, str):
        try:
            value = int(raw.strip())
        except ValueError:
            raise BadRequest(f"Invalid tokenLimit value. Expected numeric value, got: {raw}") \
                from None
    else:
        value = int(raw)
    if not 1000 <= value <= 500000:
        raise BadRequest(f"TokenLimit must be between 1000 and 500000, got: {value}")
    return value


def _positive_int(body: dict[str, Any], field: str, default: int | None) -> int:
    """``size`` (a search size) and ``maxRank`` (a rank within one): 1 to the result window."""
    value = body.get(field, default)
    if value is None:
        raise BadRequest(f"{field} is required")
    return bounded_int(value, field, 1, MAX_RESULT_WINDOW)


def _date(body: dict[str, Any], field: str, label: str) -> str:
    value = body.get(field) or ""
    if not isinstance(value, str):
        raise BadRequest(f"Field '{field}' must be a string")
    if value:
        valid = bool(_DATE.match(value))
        if valid:
            try:
                datetime.strptime(value, "%Y-%m-%d")
            except ValueError:
                valid = False
        if not valid:
            raise BadRequest(f"Invalid {label} date format: failed to parse date field "
                             f"[{value}] with format [yyyy-MM-dd]")
    return value


def referenced(client: OpenSearch, index: str, entity_id: Any, label: str) -> dict[str, Any]:
    """The stored entity, or a 400 naming the missing reference (``QuerySet [x] does not
    exist``)."""
    if not isinstance(entity_id, str) or not entity_id.strip():
        raise BadRequest(f"{label} ID cannot be null or empty")
    source = Repository(client, index).get_source(entity_id)
    if source is None:
        raise BadRequest(f"{label} [{entity_id}] does not exist")
    return source


def _budget(body: dict[str, Any], model_id: str, price_of: PriceOf) -> dict[str, Any]:
    """``maxTokens`` (integer >= 1) and ``maxCost`` (number > 0, for a model with prices)."""
    out: dict[str, Any] = {}
    if body.get("maxTokens") is not None:
        out["maxTokens"] = bounded_int(body["maxTokens"], "maxTokens", 1, MAX_BUDGET_TOKENS)
    cost = body.get("maxCost")
    if cost is not None:
        if isinstance(cost, bool) or not isinstance(cost, (int, float)) \
                or not math.isfinite(cost) or not 0 < cost <= MAX_BUDGET_COST:
            raise BadRequest(f"maxCost must be a number greater than 0, got: {cost}")
        if price_of(model_id) is None:
            raise BadRequest(f"maxCost needs a model with pricing; model [{model_id}] has none "
                             "(register it with pricing, or use maxTokens)")
        out["maxCost"] = float(cost)
    return out


def _no_prices(_: str) -> Pricing | None:
    return None


def _llm_metadata(client: OpenSearch, body: dict[str, Any],
                  price_of: PriceOf = _no_prices) -> dict[str, Any]:
    model_id = body.get("modelId")
    if not isinstance(model_id, str) or not model_id.strip():
        raise BadRequest("modelId is required for LLM_JUDGMENT")
    limit = token_limit(body.get("tokenLimit"))
    template = body.get("promptTemplate")
    if template is not None and not isinstance(template, str):
        raise BadRequest("Field 'promptTemplate' must be a string")
    error = llm_prompt.validate_template(template)
    if error:
        raise BadRequest(error)
    rating_type = body.get("llmJudgmentRatingType") or llm_prompt.SCORE0_1
    error = llm_prompt.validate_rating_type(rating_type)
    if error:
        raise BadRequest(error)
    existing = _string_list(body, "existingJudgments")
    if len(existing) > MAX_EXISTING:
        raise BadRequest(f"Too many existing judgments referenced: {len(existing)}. "
                         f"Maximum allowed is {MAX_EXISTING}")
    size = _positive_int(body, "size", 10)
    context_fields = _string_list(body, "contextFields")
    ignore_failure = _bool(body, "ignoreFailure", False)
    overwrite_cache = _bool(body, "overwriteCache", False)
    include_rationale = _bool(body, "includeRationale", False)
    budget = _budget(body, model_id, price_of)

    referenced(client, QUERY_SET_INDEX, body.get("querySetId"), "QuerySet")
    config_ids = body.get("searchConfigurationList")
    if not isinstance(config_ids, list) or not config_ids:
        raise BadRequest("searchConfigurationList is required for LLM_JUDGMENT")
    configs = [referenced(client, SEARCH_CONFIG_INDEX, c, "SearchConfiguration")
               for c in config_ids]
    indices = sorted({c["index"] for c in configs})
    for judgment_id in existing:
        _check_reusable(client, judgment_id, indices, rating_type)

    metadata: dict[str, Any] = {
        "modelId": model_id,
        "querySetId": body["querySetId"],
        "size": size,
        "searchConfigurationList": config_ids,
        "tokenLimit": limit,
        "contextFields": context_fields,
        "ignoreFailure": ignore_failure,
        "promptTemplate": template if template and template.strip()
        else llm_prompt.DEFAULT_TEMPLATE,
        "llmJudgmentRatingType": rating_type,
    }
    if existing:
        metadata["existingJudgments"] = existing
    if overwrite_cache:
        metadata["overwriteCache"] = True
    if include_rationale:
        metadata["includeRationale"] = True
    metadata.update(budget)
    return metadata


def _check_reusable(client: OpenSearch, judgment_id: str, indices: list[str],
                    rating_type: str) -> None:
    source = Repository(client, JUDGMENT_INDEX).get_source(judgment_id)
    if source is None:
        raise NotFound(f"Existing judgment [{judgment_id}] does not exist")
    if source.get("type") != "LLM_JUDGMENT":
        raise BadRequest(f"Existing judgment [{judgment_id}] is of type {source.get('type')} "
                         "and cannot be reused; only LLM_JUDGMENT judgments can")
    metadata = source.get("metadata") or {}
    theirs = []
    for config_id in metadata.get("searchConfigurationList") or []:
        config = Repository(client, SEARCH_CONFIG_INDEX).get_source(config_id)
        if config is not None:
            theirs.append(config["index"])
    if sorted(set(theirs)) != indices:
        raise BadRequest(
            f"Existing judgment [{judgment_id}] was generated for a different target index and "
            f"cannot be reused. Requested index(es): [{', '.join(indices)}], existing judgment "
            f"index(es): [{', '.join(sorted(set(theirs)))}]")
    their_type = metadata.get("llmJudgmentRatingType") or llm_prompt.SCORE0_1
    if their_type != rating_type:
        raise BadRequest(
            f"Existing judgment [{judgment_id}] was generated with rating type {their_type} "
            f"and cannot be reused for a {rating_type} judgment")


def _ubi_metadata(client: OpenSearch, body: dict[str, Any]) -> dict[str, Any]:
    model = body.get("clickModel")
    if model is None:
        raise BadRequest("clickModel is required for UBI_JUDGMENT")
    if not isinstance(model, str) or model.lower() not in CLICK_MODELS:
        raise BadRequest(f"Unsupported click model: {model}")
    max_rank = _positive_int(body, "maxRank", None)
    start = _date(body, "startDate", "start")
    end = _date(body, "endDate", "end")
    index = body.get("ubiEventsIndex") or "ubi_events"
    if not isinstance(index, str):
        raise BadRequest("Field 'ubiEventsIndex' must be a string")
    missing = ubi_events.missing_fields(client, index)
    if missing is None:
        raise BadRequest(f"UBI events index [{index}] does not exist")
    if missing:
        raise BadRequest(f"UBI events index [{index}] lacks the required UBI fields "
                         f"[{', '.join(missing)}]")
    return {"clickModel": model, "maxRank": max_rank, "startDate": start, "endDate": end,
            "ubiEventsIndex": index}


def _reference_metadata(client: OpenSearch, body: dict[str, Any]) -> dict[str, Any]:
    judge_name = body.get("judge")
    if judge_name is None:
        raise BadRequest("judge is required for REFERENCE_JUDGMENT")
    options = body.get("judgeOptions", {})
    if not isinstance(options, dict):
        raise BadRequest("judgeOptions must be an object")
    options = dict(options)
    if body.get("threshold") is not None:
        options.setdefault("threshold", body["threshold"])
    choices = [name for name in registry.names() if name != llm_judge.NAME]
    if judge_name not in choices:
        # An LLM builds its lists with LLM_JUDGMENT, with the plugin's prompt and scale.
        raise BadRequest(str(UnknownJudge(judge_name, choices)))
    try:
        judge = registry.create(judge_name, Setup(options))
    except (UnknownJudge, OptionError, BrokenJudge) as exc:
        raise BadRequest(str(exc)) from exc
    size = _positive_int(body, "size", 10)
    context_fields = _string_list(body, "contextFields")
    query_set = referenced(client, QUERY_SET_INDEX, body.get("querySetId"), "QuerySet")
    missing = sum(1 for e in read_entries(query_set) if not e.reference_answer)
    if missing and judge.needs_reference:
        raise BadRequest(f"QuerySet [{body['querySetId']}] has {missing} queries without a "
                         f"referenceAnswer; the {judge_name} judge compares results with it")
    config_ids = body.get("searchConfigurationList")
    if not isinstance(config_ids, list) or not config_ids:
        raise BadRequest("searchConfigurationList is required for REFERENCE_JUDGMENT")
    for config_id in config_ids:
        referenced(client, SEARCH_CONFIG_INDEX, config_id, "SearchConfiguration")
    out: dict[str, Any] = {"judge": judge_name}
    threshold = getattr(judge, "threshold", None)
    if isinstance(threshold, (int, float)) and not isinstance(threshold, bool):
        out["threshold"] = float(threshold)
    options.pop("threshold", None)
    if options:
        out["judgeOptions"] = options
    return {**out, "querySetId": body["querySetId"], "searchConfigurationList": config_ids,
            "size": size, "contextFields": context_fields}


def new_judgment(client: OpenSearch, body: dict[str, Any],
                 price_of: PriceOf = _no_prices, judgment_id: str | None = None) -> dict[str, Any]:
    """The PROCESSING document for a valid request; raises a 4xx for an invalid one.
    ``price_of`` gives a model's prices (a ``maxCost`` needs them); ``judgment_id`` is the id
    the create chose (api/creates.py), a new one when None."""
    name = body.get("name")
    if name is not None and not isinstance(name, str):
        raise BadRequest("Field 'name' must be a string")
    error = text_error(name, NAME_LIMIT)
    if error:
        raise BadRequest(f"Invalid name: {error}")
    description = body.get("description")
    if description is not None:
        error = text_error(description, DESCRIPTION_LIMIT)
        if error:
            raise BadRequest(f"Invalid description: {error}")
    judgment_type = body.get("type")
    if judgment_type not in TYPES:
        raise BadRequest("Invalid or missing judgment type")
    if judgment_type == "LLM_JUDGMENT":
        metadata = _llm_metadata(client, body, price_of)
    elif judgment_type == "UBI_JUDGMENT":
        metadata = _ubi_metadata(client, body)
    elif judgment_type == "REFERENCE_JUDGMENT":
        metadata = _reference_metadata(client, body)
    else:
        metadata = {"judgmentRatings": imported.build(body.get("judgmentRatings"))}
    assert isinstance(name, str)
    return {
        "id": judgment_id or new_id(),
        "timestamp": now_iso(),
        "name": name.strip(),
        "status": "PROCESSING",
        "type": judgment_type,
        "metadata": metadata,
        "judgmentRatings": [],
    }
