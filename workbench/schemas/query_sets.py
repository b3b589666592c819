"""The request bodies of query sets: ``PUT`` (manual) and ``POST`` (sampled).

``maximum`` is the ``query_set.maximum`` plugin setting: more queries than that is a 403
(``QuerySetLimitExceeded``), checked before the queries themselves, as the plugin does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from marshmallow import ValidationError

from workbench.errors import BadRequest
from workbench.schemas import budget, request_json
from workbench.schemas.body import (
    BodyField,
    BodySchema,
    NamedBodySchema,
    Step,
    StepSchema,
    Text,
    string_field,
)
from workbench.schemas.javafmt import java_string
from workbench.schemas.text import (
    DESCRIPTION_LIMIT,
    LEGACY_LIMIT,
    NAME_LIMIT,
    query_set_key_error,
    query_set_value_error,
)

FIELD = "querySetQueries"
SAMPLERS = ("pptss", "topn", "random")
DEFAULT_SIZE = 10
DEFAULT_UBI_INDEX = "ubi_queries"


class QuerySetLimitExceeded(BadRequest):
    status = 403
    error_type = "search_relevance_exception"

    def __init__(self) -> None:
        super().__init__("Query Set Limit Exceeded.")


def _as_list(raw: Any) -> list[Any]:
    """Dashboards may send the queries as one string: a JSON array, NDJSON, or one per line.
    Such a string must hold at least one query (a blank one is not an empty set)."""
    if isinstance(raw, list):
        return raw
    if isinstance(raw, str):
        text = raw.strip()
        if not text:
            raise ValidationError("querySetQueries must hold at least one query, got an empty "
                                  "string")
        if text.startswith("["):
            try:
                parsed = request_json.loads(text, FIELD)
            except ValueError:
                raise ValidationError("querySetQueries is not a valid JSON array") from None
            if isinstance(parsed, list):
                return parsed
        items: list[Any] = []
        for number, line in enumerate(raw.splitlines(), start=1):
            line = line.strip()
            if not line:
                continue
            if line.startswith("{"):
                try:
                    items.append(request_json.loads(line, f"{FIELD}[{len(items)}]"))
                except ValueError:
                    raise ValidationError(
                        f"querySetQueries line {number} is not valid JSON") from None
            else:
                items.append({"queryText": line})
        return items
    raise ValidationError("querySetQueries must be a list of query objects")


def _entry(item: Any) -> dict[str, Any]:
    """One query of a manual set as it is stored: ``queryText`` and ``customFields``."""
    if item is None:
        raise ValidationError("Query object cannot be null")
    if isinstance(item, str):
        item = {"queryText": item}
    if not isinstance(item, dict):
        raise ValidationError("Query object must be a JSON object with queryText")
    if item.get("queryText") is None:
        raise ValidationError("queryText is required")
    query_text = java_string(item["queryText"])
    error = query_set_value_error(query_text)
    if error:
        raise ValidationError(f"Invalid queryText: {error}")
    custom: dict[str, str] = {}
    for key, value in item.items():
        if key == "queryText" or value is None:
            continue
        text = java_string(value)
        key_error = query_set_key_error(key)
        if key_error:
            raise ValidationError(f"Invalid field name '{key}': {key_error}")
        if text:
            value_error = query_set_value_error(text)
            if value_error:
                raise ValidationError(f"Invalid value for field '{key}': {value_error}")
        custom[key] = text
    return {"queryText": query_text, "customFields": custom}


class _Queries(BodyField):
    """``querySetQueries``: a list (or one string of them), at most ``maximum`` entries."""

    def check(self, value: Any) -> list[dict[str, Any]]:
        if value is None:
            raise ValidationError("querySetQueries is required")
        items = _as_list(value)
        if len(items) > self.parent.maximum:  # type: ignore[union-attr]
            raise QuerySetLimitExceeded()
        return [_entry(item) for item in items]


class _ManualSampling(BodyField):
    def check(self, value: Any) -> str:
        # Absent is manual (the field's default); anything else (null included) is refused,
        # quoted as Java would not (``None``): the message the workbench has always given.
        if value != "manual":
            raise ValidationError(f"Support sampling as manual only. sampling: {value}")
        return "manual"


class ManualQuerySetSchema(NamedBodySchema):
    """``PUT /query_sets``: name, description, ``sampling`` (``manual``), querySetQueries."""

    sampling = _ManualSampling(data_key="sampling", load_default="manual")
    querySetQueries = _Queries(data_key="querySetQueries")

    def __init__(self, maximum: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.maximum = maximum


class _Size(BodyField):
    """``querySetSize``: a JSON number, truncated to an integer as the plugin does; positive,
    and at most ``maximum``. Absent is 10; an explicit null is "must be a number"."""

    def check(self, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValidationError("querySetSize must be a number")
        size = int(value)
        if size <= 0:
            raise ValidationError(f"querySetSize must be a positive integer, got: {value}")
        if size > self.parent.maximum:  # type: ignore[union-attr]
            raise QuerySetLimitExceeded()
        return size


class _UbiIndex(BodyField):
    """``ubiQueriesIndex``: a string; absent, null or any false value is ``ubi_queries``."""

    def check(self, value: Any) -> str:
        index = string_field(value or DEFAULT_UBI_INDEX, "ubiQueriesIndex")
        assert index is not None
        return index


class _Sampler(BodyField):
    def check(self, value: Any) -> str:
        if value not in SAMPLERS:
            raise ValidationError(f"Unknown sampler type: {value}")
        assert isinstance(value, str)
        return value


class SampledQuerySetSchema(BodySchema):
    """``POST /query_sets``: name, description, querySetSize, ubiQueriesIndex, sampling."""

    name = Text("name", LEGACY_LIMIT)
    description = Text("description", LEGACY_LIMIT, optional=True)
    querySetSize = _Size(data_key="querySetSize", load_default=DEFAULT_SIZE)
    ubiQueriesIndex = _UbiIndex(data_key="ubiQueriesIndex")
    sampling = _Sampler(data_key="sampling", load_default="pptss")

    def __init__(self, maximum: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.maximum = maximum


# -- generated from an index (docs/cold-start.md) -------------------------------------------------

#: ``sampling`` of a set an LLM generates from an index's documents: the plugin branch's constant
#: and the meta issue's name for it
LLM_SAMPLERS = ("llm_random", "llm_generated")
#: ``sampling`` of a set the reference generator builds from the documents' own fields (a
#: workbench extension: no model, deterministic, free)
REFERENCE_SAMPLER = "reference_random"
GENERATED_SAMPLERS = (*LLM_SAMPLERS, REFERENCE_SAMPLER)
CATEGORIES = ("lexical", "semantic")
DEFAULT_QUERY_TERMS = 100
MAX_CONTEXT_FIELDS = 32


def is_generated(body: Any) -> bool:
    """Whether a ``PUT /query_sets`` body asks for a generated set (else it is a manual one)."""
    return isinstance(body, dict) and body.get("sampling") in GENERATED_SAMPLERS


class _Required(BodyField):
    """A required non-blank string (``index``, ``modelId``), stripped."""

    def check(self, value: Any) -> str:
        text = string_field(value, str(self.data_key))
        if text is None or not text.strip():
            raise ValidationError(f"{self.data_key} is required")
        return text.strip()


class _ModelId(Step):
    """``modelId``: required for an LLM sampler, refused for the reference generator (which
    asks no model, so a model named there is a mistake worth saying)."""

    def check(self, value: Any) -> str | None:
        sampler = self.loaded.get("sampling")
        text = string_field(value, "modelId")
        if sampler == REFERENCE_SAMPLER:
            if text:
                raise ValidationError(f"modelId is not used by sampling {REFERENCE_SAMPLER}: it "
                                      "asks no model")
            return None
        if text is None or not text.strip():
            raise ValidationError(f"modelId is required for sampling {sampler}")
        return text.strip()


class _QueryTerms(BodyField):
    """``numberOfQueryTerms``: how many queries to generate (one per sampled document), at most
    the ``query_set.maximum`` setting, as a sampled set's size."""

    def check(self, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
            raise ValidationError("numberOfQueryTerms must be an integer")
        count = int(value)
        if count <= 0:
            raise ValidationError(f"numberOfQueryTerms must be a positive integer, got: {count}")
        if count > self.parent.maximum:  # type: ignore[union-attr]
            raise QuerySetLimitExceeded()
        return count


class _Strings(BodyField):
    """A list of distinct non-blank strings (``contextFields``, ``categories``)."""

    def __init__(self, allowed: tuple[str, ...] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.allowed = allowed

    def check(self, value: Any) -> list[str]:
        name = str(self.data_key)
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip()
                                                  for v in value):
            raise ValidationError(f"{name} must be a list of non-empty strings")
        items = list(dict.fromkeys(v.strip() for v in value))
        if len(items) > MAX_CONTEXT_FIELDS:
            raise ValidationError(f"{name} must have at most {MAX_CONTEXT_FIELDS} entries")
        if self.allowed is not None:
            unknown = [v for v in items if v not in self.allowed]
            if unknown:
                raise ValidationError(f"{name} [{', '.join(unknown)}] are not supported; "
                                      f"expected any of [{', '.join(self.allowed)}]")
            if not items:
                raise ValidationError(f"{name} must name at least one of "
                                      f"[{', '.join(self.allowed)}]")
        return items


class _Seed(BodyField):
    def check(self, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**31:
            raise ValidationError("seed must be an integer from 0 to 2147483647")
        return value


class _GeneratedSampling(Step):
    def check(self, value: Any) -> str:
        if value not in GENERATED_SAMPLERS:
            raise ValidationError(f"Unknown sampler type: {value}")
        assert isinstance(value, str)
        return value


class _OptionalField(BodyField):
    """``stratifyField``: absent or null is none; else a non-blank string."""

    def check(self, value: Any) -> str | None:
        text = string_field(value, str(self.data_key))
        if text is not None and not text.strip():
            raise ValidationError(f"{self.data_key} must not be blank")
        return None if text is None else text.strip()


@dataclass(frozen=True)
class GenerationRules:
    """What a generated set's body asks of the layers above: ``price_of(model)``, a model's
    prices or None (``maxCost`` needs them); ``judge(spec, model_id)`` builds the consistency
    filter's judge from ``{"judge": name, ...options}`` (raising the 400 of a judge unknown or
    options it refuses)."""

    price_of: Callable[[str], object | None]
    judge: Callable[[dict[str, Any], str | None], Any]


def _no_model(name: str) -> str:
    return f"{name} is not used by sampling {REFERENCE_SAMPLER}: it asks no model"


class _Filter(Step):
    """``filter``: the consistency filter, ``{"judge": name, ...the judge's options}``; absent
    or null is none. The ``llm`` judge grades with the set's own ``modelId`` (one model, one
    price, one budget), so it takes no ``modelId`` of its own and needs an LLM sampler."""

    def check(self, value: Any) -> dict[str, Any] | None:
        if value is None:
            return None
        if not isinstance(value, dict):
            raise ValidationError("filter must be an object with a judge")
        name = value.get("judge")
        if not isinstance(name, str) or not name.strip():
            raise ValidationError("filter.judge is required: the judge that rates each query "
                                  "against its source document")
        spec = {**value, "judge": name.strip()}
        model_id = self.loaded.get("modelId")
        if spec["judge"] == "llm":
            if "modelId" in spec:
                raise ValidationError("filter.modelId is not taken: the llm filter grades with "
                                      "the set's modelId")
            if model_id is None:
                raise ValidationError(f"filter judge llm needs a model: sampling "
                                      f"{REFERENCE_SAMPLER} has none (use token_overlap or "
                                      "semantic)")
        self.rules.judge(spec, model_id)
        return spec


class _MaxTokens(Step):
    def check(self, value: Any) -> int | None:
        if value is not None and self.loaded.get("sampling") == REFERENCE_SAMPLER:
            raise ValidationError(_no_model("maxTokens"))
        return budget.max_tokens(value)


class _MaxCost(Step):
    def check(self, value: Any) -> float | None:
        if value is not None and self.loaded.get("sampling") == REFERENCE_SAMPLER:
            raise ValidationError(_no_model("maxCost"))
        return budget.max_cost(value, self.loaded.get("modelId"), self.rules.price_of)


class GeneratedQuerySetSchema(StepSchema):
    """``PUT /query_sets`` with ``sampling`` ``llm_random`` (or ``llm_generated``, the same) or
    ``reference_random``: queries generated from the documents of ``index`` (stored as
    ``sourceIndex``). ``seed`` and ``stratifyField`` are workbench extensions; whether the index
    and its ``contextFields`` exist is checked against the cluster by the route. ``filter`` (the
consistency filter), ``maxTokens`` and ``maxCost`` (the budget of its LLM calls, checked as an
LLM judgment's) are workbench extensions too."""

    name = Text("name", NAME_LIMIT)
    description = Text("description", DESCRIPTION_LIMIT, optional=True)
    sampling = _GeneratedSampling(data_key="sampling")
    index = _Required(data_key="index")
    modelId = _ModelId(data_key="modelId")
    numberOfQueryTerms = _QueryTerms(data_key="numberOfQueryTerms",
                                     load_default=DEFAULT_QUERY_TERMS)
    contextFields = _Strings(data_key="contextFields", load_default=[])
    categories = _Strings(allowed=CATEGORIES, data_key="categories",
                          load_default=list(CATEGORIES))
    seed = _Seed(data_key="seed", load_default=0)
    stratifyField = _OptionalField(data_key="stratifyField")
    filter = _Filter(data_key="filter")
    maxTokens = _MaxTokens(data_key="maxTokens")
    maxCost = _MaxCost(data_key="maxCost")

    def __init__(self, maximum: int, rules: GenerationRules | None = None,
                 **kwargs: Any) -> None:
        super().__init__(rules, **kwargs)
        self.maximum = maximum
