"""The request bodies of experiments: ``PUT /experiments`` (one schema per type, chosen by
``type``), ``PATCH /experiments/{id}``; and the shape of a HYBRID_OPTIMIZER search body.

Whether a query set, search configuration or judgment exists is asked of the cluster by the
domain (experiments/create.py, a layer above this one): the schema is given those reads as
``Lookups`` (its ``rules``) and calls them in field order. As the checks were written one after the
other, a field after the first failing one is not checked at all (schemas/body.py, ``Step``): a bad
body costs no read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from marshmallow import ValidationError, missing

from workbench.schemas.body import BodyField, BodySchema, Step, StepSchema
from workbench.schemas.configuration_list import ConfigurationIds, local_only, resolve
from workbench.schemas.numbers import MAX_RESULT_WINDOW, bounded_int
from workbench.schemas.text import DESCRIPTION_LIMIT, NAME_LIMIT, text_error

PAIRWISE = "PAIRWISE_COMPARISON"
POINTWISE = "POINTWISE_EVALUATION"
HYBRID = "HYBRID_OPTIMIZER"
TYPES = (PAIRWISE, POINTWISE, HYBRID)


@dataclass(frozen=True)
class Lookups:
    """The reads an experiment's body needs; each answers None for an id that does not exist.
    ``query_set`` and ``judgment``: the entity's ``status`` field at least (a query set made by
    hand or sampled has none). ``remote_configuration``: a remote search configuration
    (issue 47), None when there is none (the default: no remote configurations)."""

    query_set: Callable[[str], dict[str, Any] | None]
    search_configuration: Callable[[str], dict[str, Any] | None]
    judgment: Callable[[str], dict[str, Any] | None]
    remote_configuration: Callable[[str], dict[str, Any] | None] = lambda _: None


def lenient_text(value: Any, name: str, limit: int) -> str | None:
    """An optional name or description: a string, stripped; blank or null is absent (None)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError(f"Field '{name}' must be a string")
    value = value.strip()
    if not value:
        return None
    error = text_error(value, limit)
    if error:
        raise ValidationError(f"Invalid {name}: {error}")
    return value


class _LenientText(Step):
    def __init__(self, name: str, limit: int, **kwargs: Any) -> None:
        super().__init__(data_key=name, **kwargs)
        self.label, self.limit = name, limit

    def check(self, value: Any) -> str | None:
        return lenient_text(value, self.label, self.limit)


def _entity_id(value: Any, label: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"{label} ID cannot be null or empty")
    return value


def _id_list(value: Any, field: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValidationError(f"{field} must be a list of ids")
    return value


class _Lookup(Step):
    """A field that reads the cluster through its ``ExperimentSchema``'s ``Lookups``."""

    @property
    def rules(self) -> Lookups:
        lookups: Lookups = self.schema.rules
        return lookups

    @property
    def experiment_type(self) -> str | None:
        assert isinstance(self.parent, ExperimentSchema)
        return self.parent.TYPE


class _Type(Step):
    def check(self, value: Any) -> str:
        if not isinstance(value, str) or value not in TYPES:
            raise ValidationError("Invalid or missing experiment type")
        return value


class _Size(Step):
    def check(self, value: Any) -> int:
        if value is None:
            raise ValidationError("size is required")
        return bounded_int(value, "size", 1, MAX_RESULT_WINDOW)


class _QuerySet(_Lookup):
    def check(self, value: Any) -> str:
        query_set_id = _entity_id(value, "QuerySet")
        query_set = self.rules.query_set(query_set_id)
        if query_set is None:
            raise ValidationError(f"QuerySet [{query_set_id}] does not exist")
        status = query_set.get("status")
        if status == "PROCESSING":
            raise ValidationError(f"QuerySet [{query_set_id}] is still being generated (status "
                                  "PROCESSING); run the experiment once it is COMPLETED")
        if status not in (None, "COMPLETED"):
            raise ValidationError(f"QuerySet [{query_set_id}] has no queries to run: its "
                                  f"generation ended {status}")
        # A set with no queries (sampled from UBI data that has none) is accepted, as by the
        # plugin: the experiment completes with no results.
        return query_set_id


class _Configurations(_Lookup):
    """Each entry must name a configuration, local or remote (schemas/configuration_list.py);
    PAIRWISE_COMPARISON compares exactly two, the others need one; HYBRID_OPTIMIZER searches
    local ones only."""

    def check(self, value: Any) -> ConfigurationIds:
        rules = self.rules
        ids = resolve(_id_list(value, "searchConfigurationList"),
                      lambda c: rules.search_configuration(c) is not None,
                      lambda c: rules.remote_configuration(c) is not None)
        if self.experiment_type == HYBRID:
            local_only(f"{HYBRID} experiments", ids)
        if self.experiment_type == PAIRWISE and len(ids) != 2:
            raise ValidationError("PAIRWISE_COMPARISON requires exactly 2 search "
                                  f"configurations, got: {len(ids)}")
        if not ids:
            raise ValidationError("searchConfigurationList must name at least one search "
                                  "configuration")
        return ids


class _Judgments(_Lookup):
    """Required for the types that score against judgments. A judgment still being generated
    is accepted (the job waits for it, experiments/waiting.py); one that ended ERROR is not."""

    def check(self, value: Any) -> list[Any]:
        ids = _id_list(value, "judgmentList")
        experiment_type = self.experiment_type
        if experiment_type in (POINTWISE, HYBRID) and not ids:
            raise ValidationError(f"judgmentList is required for {experiment_type}")
        for judgment_id in ids:
            _entity_id(judgment_id, "Judgment")
            judgment = self.rules.judgment(judgment_id)
            if judgment is None:
                raise ValidationError(f"Judgment [{judgment_id}] does not exist")
            if judgment.get("status") == "ERROR":
                raise ValidationError(f"Judgment [{judgment_id}] is not COMPLETED "
                                      f"(status: {judgment.get('status')})")
        return ids


class ExperimentSchema(StepSchema):
    """``PUT /experiments`` of no known type: only ``type`` is checked, and it fails. Each type
    has its own subclass (``experiment_schema`` picks it)."""

    TYPE: str | None = None

    type = _Type(data_key="type")
    name = _LenientText("name", NAME_LIMIT)
    description = _LenientText("description", DESCRIPTION_LIMIT)
    size = _Size(data_key="size")
    querySetId = _QuerySet(data_key="querySetId")
    searchConfigurationList = _Configurations(data_key="searchConfigurationList")
    judgmentList = _Judgments(data_key="judgmentList")

    def __init__(self, lookups: Lookups, **kwargs: Any) -> None:
        super().__init__(lookups, **kwargs)


class PairwiseExperimentSchema(ExperimentSchema):
    """PAIRWISE_COMPARISON: exactly two search configurations; judgments optional."""

    TYPE = PAIRWISE


class PointwiseExperimentSchema(ExperimentSchema):
    """POINTWISE_EVALUATION: one or more search configurations, and judgments."""

    TYPE = POINTWISE


class HybridExperimentSchema(ExperimentSchema):
    """HYBRID_OPTIMIZER: as pointwise. Whether each configuration is a two-clause ``hybrid``
    query is checked by the job (``HybridSearchSchema``), which ends ERROR with the reason."""

    TYPE = HYBRID


SCHEMAS: dict[str, type[ExperimentSchema]] = {
    PAIRWISE: PairwiseExperimentSchema,
    POINTWISE: PointwiseExperimentSchema,
    HYBRID: HybridExperimentSchema,
}


def experiment_schema(body: dict[str, Any], lookups: Lookups) -> ExperimentSchema:
    """The schema of ``body``'s ``type`` (an unknown type: one that refuses it)."""
    experiment_type = body.get("type")
    schema = SCHEMAS.get(experiment_type) if isinstance(experiment_type, str) else None
    return (schema or ExperimentSchema)(lookups=lookups)


# -- PATCH /experiments/{id} -------------------------------------------------------------------

class _PatchName(Step):
    """``name``, if given, cannot be blank; with neither field there is nothing to change."""

    def deserialize(self, value: Any, attr: str | None = None,
                    data: Any = None, **kwargs: Any) -> Any:
        if isinstance(data, dict) and "name" not in data:
            if "description" not in data:
                self.schema.failed = True
                raise ValidationError("At least one of 'name' or 'description' must be "
                                      "provided for update")
            return missing
        return super().deserialize(value, attr, data, **kwargs)

    def check(self, value: Any) -> str:
        name = lenient_text(value, "name", NAME_LIMIT)
        if name is None:
            raise ValidationError("Invalid name: Text cannot be empty")
        return name


class _PatchDescription(Step):
    """``description``, if given; blank or null clears it."""

    def deserialize(self, value: Any, attr: str | None = None,
                    data: Any = None, **kwargs: Any) -> Any:
        if isinstance(data, dict) and "description" not in data:
            return missing
        return super().deserialize(value, attr, data, **kwargs)

    def check(self, value: Any) -> str:
        return lenient_text(value, "description", DESCRIPTION_LIMIT) or ""


class ExperimentPatchSchema(StepSchema):
    """``PATCH /experiments/{id}``: loads only the fields given (the changes)."""

    name = _PatchName(data_key="name")
    description = _PatchDescription(data_key="description")


# -- the search body of a HYBRID_OPTIMIZER configuration ----------------------------------------

class _HybridQuery(BodyField):
    def check(self, value: Any) -> list[dict[str, Any]]:
        if not isinstance(value, dict):
            raise ValidationError("query in search configuration does not have query")
        hybrid = value.get("hybrid")
        if len(value) != 1 or not isinstance(hybrid, dict):
            raise ValidationError("query in search configuration does must be of type hybrid")
        queries = hybrid.get("queries")
        if not isinstance(queries, list):
            raise ValidationError("hybrid query in search configuration does not have queries")
        if len(queries) != 2:
            raise ValidationError("invalid hybrid query: expected exactly [2] sub-queries but "
                                  f"found [{len(queries)}]")
        return queries


class _NoPipeline(BodyField):
    def deserialize(self, value: Any, attr: str | None = None,
                    data: Any = None, **kwargs: Any) -> Any:
        if isinstance(data, dict) and "search_pipeline" in data:
            raise ValidationError("search pipeline is not allowed in search request")
        return missing


class HybridSearchSchema(BodySchema):
    """A configuration's rendered search body, as HYBRID_OPTIMIZER needs it: a ``query`` that is
    only a ``hybrid`` of two sub-queries (loaded as ``query``: the sub-queries), and no
    ``search_pipeline`` of its own (the optimiser sets one per variant). The messages are the
    plugin's, typo included."""

    query = _HybridQuery(data_key="query")
    search_pipeline = _NoPipeline(data_key="search_pipeline")
