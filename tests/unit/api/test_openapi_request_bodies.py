"""The OpenAPI document's request bodies name exactly the fields the request-body schemas read
(workbench/schemas/), so the document and the code cannot drift apart (issue 21).

Every JSON body the document describes (the SRW routes', and those of the cluster paths the
workbench answers itself: ``PUT /_cluster/settings``, a workbench model's ``_predict``) is either
checked here, against the schema(s) its route loads it with, or named in ``UNPARSED`` (bodies the
workbench reads without a schema). A body's
documented properties are resolved through ``$ref``, ``allOf`` (their union) and ``oneOf`` /
``anyOf`` (the member the schema reads: a judgment or ``_evaluate`` shape). They must equal the
schema's field data keys, give or take the short allow-lists below, each saying why.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from marshmallow import Schema

from workbench.api import openapi
from workbench.llm.spec import FIELDS, SNAKE, SpecError
from workbench.schemas import experiments, judgments
from workbench.schemas.ab_tests import ABTestSearchSchema, CreateABTestSchema, UpdateABTestSchema
from workbench.schemas.cluster_settings import ClusterSettingsSchema
from workbench.schemas.evaluate import TOP_LEVEL_OPTIONS, BatchSchema
from workbench.schemas.evaluate_brief import BriefEvaluateSchema
from workbench.schemas.evaluate_workbench import WorkbenchEvaluateSchema
from workbench.schemas.holes import FillSchema
from workbench.schemas.judgment_ratings import CompareRules, CompareSchema, RatingEditsSchema
from workbench.schemas.ml_predict import PredictSchema
from workbench.schemas.models import ModelChangesSchema, ModelSchema
from workbench.schemas.monitors import MonitorRules, MonitorSchema
from workbench.schemas.query_sets import (
    GeneratedQuerySetSchema,
    ManualQuerySetSchema,
    SampledQuerySetSchema,
)
from workbench.schemas.remote_search import (
    RemoteExecuteSchema,
    RemoteRules,
    RemoteSearchConfigurationSchema,
)
from workbench.schemas.schedules import ScheduleSchema
from workbench.schemas.search_configurations import SearchConfigurationSchema

PREFIX = "/_plugins/_search_relevance"
HTTP_METHODS = ("get", "put", "post", "delete", "patch")

# Bodies the workbench reads without a schema: a list's paging and sort, and the search DSL of
# ``_search``, passed to the cluster as it is.
UNPARSED = {"#/components/requestBodies/ListBody", "#/components/requestBodies/SearchBody"}

# -- the allow-lists ----------------------------------------------------------------------------
# Documented fields that no schema field is keyed by: a rule given the whole body reads them
# beside its own field.
# schemas/evaluate.judge_options: judge options given at the top level of an _evaluate body
TOP_OPTIONS = frozenset(TOP_LEVEL_OPTIONS)
WORKBENCH_EVALUATE_READS = TOP_OPTIONS | {
    "query",  # _QueryText: the alias of queryText
    "searchConfigurationId", "index", "searchQuery",  # _Source (keyed "hits"): the results' source
}
BRIEF_EVALUATE_READS = TOP_OPTIONS | {"debug"}  # _Eval: eval.debug or the top-level debug
REFERENCE_READS = frozenset({"judgeOptions", "threshold"})  # _Judge: the judge's options
FILL_READS = frozenset({"judgeOptions"})  # schemas/holes._Judge: the judge's options
COMPARE_READS = frozenset({"reference", "candidate"})  # _JudgmentId: short spellings of the ids
# What a model body may hold is llm/spec's rule (parse_spec, after normalise gave the canonical
# names), which ModelSchema.spec applies to the whole body; id and apiKey are fields of their own.
MODEL_READS = frozenset().union(*FIELDS.values()) - {"id", "apiKey"}
# Schema data keys that name no field of the body.
COMPARE_LISTS = frozenset({"_lists"})  # _Lists: the two stored lists, read once both ids are valid
MODEL_SPEC = frozenset({"spec"})  # ModelSchema.spec: the whole body, as the model it registers
SETTINGS_CHANGES = frozenset({"_changes"})  # _Changes: the workbench's keys of both sections
# schemas/ab_tests: the steps that check the body as a whole (empty; both ids; any field)
AB_WHOLE_BODY = frozenset({"\0body", "\0bodyboth", "\0bodyany"})
# schemas/remote_search: the step that refuses a field the body should not have
REMOTE_KEYS = frozenset({"\0fields"})


# -- schemas built with harmless rules (only their fields are read here) -------------------------

def _nothing(*_: Any) -> None:
    return None


def _judgment_rules() -> judgments.JudgmentRules:
    return judgments.JudgmentRules(
        entity=_nothing, price_of=_nothing, template_error=_nothing, rating_type_error=_nothing,
        default_template="", default_rating_type="", click_models=(), judge=_nothing,
        missing_references=lambda _: 0, imported_ratings=lambda _: [])


def _lookups() -> experiments.Lookups:
    return experiments.Lookups(query_set=_nothing, search_configuration=_nothing,
                               judgment=_nothing)


def _model_schemas(path_id: str | None = None) -> tuple[Schema, ...]:
    return (ModelChangesSchema(normalise=dict, invalid=SpecError, path_id=path_id),
            ModelSchema(parse=_nothing, check_key=_nothing, invalid=SpecError))


# -- the bodies checked ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Body:
    """One operation's request body as a route loads it. ``path``: under ``prefix`` (the SRW
    routes', unless told). ``member``: the ``oneOf``/``anyOf`` member (a component's name) this
    schema reads."""

    method: str
    path: str
    schemas: tuple[Schema, ...]
    member: str | None = None
    reads: frozenset[str] = frozenset()  # documented, read by a rule (allow-list above)
    internal: frozenset[str] = frozenset()  # data keys that are no body field (allow-list above)
    label: str = ""  # tells apart the bodies of one operation
    prefix: str = PREFIX

    @property
    def full_path(self) -> str:
        return self.prefix + self.path

    @property
    def id(self) -> str:
        return " ".join(filter(None, (self.method.upper(), self.path, self.member, self.label)))


# The oneOf member of JudgmentRequest for each judgment type.
JUDGMENT_MEMBERS = {judgments.LLM: "LlmJudgment", judgments.UBI: "UbiJudgment",
                    judgments.IMPORT: "ImportJudgment", judgments.REFERENCE: "ReferenceJudgment"}


def bodies() -> Iterator[Body]:
    yield Body("put", "/query_sets", (ManualQuerySetSchema(maximum=1),), "ManualQuerySet")
    yield Body("put", "/query_sets", (GeneratedQuerySetSchema(maximum=1),), "GeneratedQuerySet")
    yield Body("post", "/query_sets/_estimate", (GeneratedQuerySetSchema(maximum=1),))
    yield Body("post", "/query_sets", (SampledQuerySetSchema(maximum=1),))
    yield Body("put", "/search_configurations", (SearchConfigurationSchema(query_check=_nothing),))
    for judgment_type, member in JUDGMENT_MEMBERS.items():
        schema = judgments.SCHEMAS[judgment_type](_judgment_rules())
        reads = REFERENCE_READS if judgment_type == judgments.REFERENCE else frozenset()
        yield Body("put", "/judgments", (schema,), member, reads)
    yield Body("post", "/judgments/_estimate", (judgments.LlmEstimateSchema(_judgment_rules()),))
    yield Body("put", "/judgments/{entity_id}", (RatingEditsSchema(),))
    compare = CompareRules(judgment=lambda _: {}, default_threshold=lambda _: 0.0)
    yield Body("post", "/judgments/_compare", (CompareSchema(compare),), reads=COMPARE_READS,
               internal=COMPARE_LISTS)
    for experiment_type, schema_class in experiments.SCHEMAS.items():
        yield Body("put", "/experiments", (schema_class(lookups=_lookups()),),
                   label=experiment_type)
    yield Body("patch", "/experiments/{entity_id}", (experiments.ExperimentPatchSchema(),))
    for route in ("_fill", "_fill/_estimate"):
        yield Body("post", f"/experiments/{{entity_id}}/{route}",
                   (FillSchema(_judgment_rules(), 10),), reads=FILL_READS)
    yield Body("post", "/experiments/schedule", (ScheduleSchema(minimum_interval=lambda: 0.0),))
    for method in ("put", "post"):
        yield Body(method, "/models", _model_schemas(), reads=MODEL_READS, internal=MODEL_SPEC)
    yield Body("put", "/models/{entity_id}", _model_schemas("m"), reads=MODEL_READS,
               internal=MODEL_SPEC)
    yield Body("post", "/_evaluate", (WorkbenchEvaluateSchema(query_check=_nothing),),
               "EvaluateRequest", WORKBENCH_EVALUATE_READS)
    yield Body("post", "/_evaluate", (BriefEvaluateSchema(),), "BriefEvaluateRequest",
               BRIEF_EVALUATE_READS)
    yield Body("post", "/_evaluate/_batch", (BatchSchema(),))
    yield Body("put", "/ab_tests/{test_id}", (CreateABTestSchema(),),
               internal=AB_WHOLE_BODY & {"\0body", "\0bodyboth"})
    yield Body("put", "/ab_tests/{test_id}/_update", (UpdateABTestSchema(),),
               internal=AB_WHOLE_BODY & {"\0body", "\0bodyany"})
    yield Body("post", "/ab_tests/{test_id}/_search", (ABTestSearchSchema(),))
    remote = RemoteSearchConfigurationSchema(RemoteRules(*[_nothing] * 4))
    for method, path in (("put", "/remote_search_configurations"),
                         ("post", "/remote_search_configurations"),
                         ("put", "/remote_search_configurations/{entity_id}")):
        yield Body(method, path, (remote,), internal=REMOTE_KEYS)
    yield Body("post", "/remote_search/execute", (RemoteExecuteSchema(),), internal=REMOTE_KEYS)
    for path in ("/monitors", "/monitors/{entity_id}"):
        yield Body("put", path, (MonitorSchema(MonitorRules(*[_nothing] * 7)),))
    # cluster paths the workbench answers itself
    yield Body("put", "/_cluster/settings", (ClusterSettingsSchema(),), internal=SETTINGS_CHANGES,
               prefix="")
    yield Body("post", "/_plugins/_ml/models/{model_id}/_predict", (PredictSchema(),), prefix="")


BODIES = list(bodies())


# -- the document ---------------------------------------------------------------------------------

def resolve(node: dict[str, Any]) -> dict[str, Any]:
    """``node`` with its ``$ref`` followed (its own keys kept beside the target's)."""
    while "$ref" in node:
        target: Any = openapi.document()
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def ref_name(node: dict[str, Any]) -> str | None:
    ref = node.get("$ref")
    return ref.rsplit("/", 1)[-1] if isinstance(ref, str) else None


def properties(node: dict[str, Any], member: str | None) -> set[str]:
    """The property names of a schema: its own, every ``allOf`` part's, and those of the
    ``oneOf``/``anyOf`` member named ``member``. A composition of constraints only (``anyOf``
    of ``required`` lists) adds none."""
    node = resolve(node)
    names = set(node.get("properties", {}))
    for part in node.get("allOf", []):
        names |= properties(part, member)
    for keyword in ("oneOf", "anyOf"):
        options = node.get(keyword, [])
        chosen = [option for option in options if ref_name(option) == member]
        if chosen:
            names |= properties(chosen[0], member)
        else:
            assert all("$ref" not in o and "properties" not in o for o in options), (
                f"{keyword} of {[ref_name(o) for o in options]}: name the member to check")
    return names


def body_schema(method: str, full_path: str) -> dict[str, Any]:
    operation = openapi.document()["paths"][full_path][method]
    request_body = resolve(operation["requestBody"])
    schema: dict[str, Any] = request_body["content"]["application/json"]["schema"]
    return schema


def operations() -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(method, path, operation) of every documented operation with a body: the SRW routes' and
    the cluster paths' the workbench answers itself."""
    for path, item in openapi.document()["paths"].items():
        for method in HTTP_METHODS:
            if method in item and "requestBody" in item[method]:
                yield method, path, item[method]


# -- the checks -----------------------------------------------------------------------------------

@pytest.mark.parametrize("body", BODIES, ids=[body.id for body in BODIES])
def test_the_documented_properties_are_the_schema_fields(body: Body) -> None:
    keys = {field.data_key or name for schema in body.schemas
            for name, field in schema.fields.items()}
    # the allow-lists stay true: a field read by a rule is no field of its own, an internal key is
    assert not body.reads & keys, f"{sorted(body.reads & keys)} are schema fields now"
    assert body.internal <= keys, f"{sorted(body.internal - keys)} are no schema fields any more"
    documented = properties(body_schema(body.method, body.full_path), body.member)
    expected = (keys - body.internal) | body.reads
    assert sorted(documented - expected) == [], "documented, but the schema does not read it"
    assert sorted(expected - documented) == [], "read by the schema, missing from openapi.yaml"


def test_every_documented_body_is_checked_or_read_without_a_schema() -> None:
    checked = {(body.method, body.full_path) for body in BODIES}
    seen = set()
    for method, path, operation in operations():
        seen.add((method, path))
        ref = operation["requestBody"].get("$ref")
        if (method, path) in checked:
            assert ref not in UNPARSED, f"{method.upper()} {path}"
            continue
        assert ref in UNPARSED, (f"{method.upper()} {path}: check its body against its schema "
                                 f"in this module, or name it in UNPARSED")
        if ref.endswith("/SearchBody"):
            assert path.endswith("/_search"), f"{method.upper()} {path}"
        else:
            assert method == "get", f"{method.upper()} {path}"
    assert checked <= seen, f"checked, but not documented with a body: {sorted(checked - seen)}"


def test_each_judgment_type_is_its_own_member() -> None:
    request = resolve({"$ref": "#/components/schemas/JudgmentRequest"})
    assert set(request["properties"]["type"]["enum"]) == set(judgments.TYPES)
    assert set(judgments.SCHEMAS) == set(judgments.TYPES) == set(JUDGMENT_MEMBERS)
    assert {ref_name(option) for option in request["oneOf"]} == set(JUDGMENT_MEMBERS.values())
    for judgment_type, member in JUDGMENT_MEMBERS.items():
        member_schema = resolve({"$ref": f"#/components/schemas/{member}"})
        assert member_schema["properties"]["type"] == {"const": judgment_type}
    # a body of no known type is read for the shared fields only: JudgmentRequest's own
    shared = judgments.JudgmentSchema(_judgment_rules())
    assert set(request["properties"]) == {f.data_key or n for n, f in shared.fields.items()}


def test_each_experiment_type_is_documented() -> None:
    request = resolve({"$ref": "#/components/schemas/ExperimentRequest"})
    assert set(request["properties"]["type"]["enum"]) == set(experiments.SCHEMAS)


def test_the_model_body_names_the_spellings_it_accepts() -> None:
    description = resolve({"$ref": "#/components/schemas/ModelChange"})["description"]
    for spelling in (*SNAKE.values(), "baseUrl"):
        assert f"`{spelling}`" in description
