"""The request-body schemas of judgments (issue 21): ``PUT /judgments`` by type, the estimate,
the ratings edit and ``_compare``. Exact reasons (those the integration tests pin), the order in
which they are reported, defaults, and no service asked once an earlier field failed."""

from __future__ import annotations

import contextlib
import math
from typing import Any

import pytest
from marshmallow import Schema

from workbench.errors import (
    BadRequest,
    Conflict,
    NotFound,
    SearchRelevanceError,
    TextError,
    WorkbenchError,
)
from workbench.judgments.limits import FLOAT_MAX, MAX_RATINGS, size_error
from workbench.judgments.llm import prompt as llm_prompt
from workbench.schemas.body import load
from workbench.schemas.judgment_fields import JudgmentRules, JudgmentSchema
from workbench.schemas.judgment_ratings import (
    CompareRules,
    CompareSchema,
    ImportedRatingsSchema,
    RatingEditsSchema,
    apply_edits,
    check_scale,
    imported_ratings,
    java_double,
    rating_type_of,
)
from workbench.schemas.judgment_sources import ChosenJudge
from workbench.schemas.judgments import LlmEstimateSchema, LlmJudgmentSchema, judgment_schema

STORED = {("QuerySet", "qs"): {"querySetQueries": [{"queryText": "a"}]},
          ("QuerySet", "qs-ref"): {"querySetQueries": [{"queryText": "a",
                                                        "customFields": {"referenceAnswer": "r"}}]},
          ("SearchConfiguration", "c1"): {"index": "i1"},
          ("SearchConfiguration", "c2"): {"index": "i2"}}


class FakeJudge:
    def __init__(self, needs_reference: bool, threshold: float | None = None) -> None:
        self.needs_reference, self.threshold = needs_reference, threshold


def _judge(name: Any, options: dict[str, Any]) -> FakeJudge:
    if name not in ("overlap", "exact"):
        raise BadRequest(f"Unknown judge [{name}]; use one of: overlap, exact")
    if "bad" in options:
        raise BadRequest("option bad is not known")
    return FakeJudge(needs_reference=name == "overlap", threshold=options.get("threshold"))


class Cluster:
    """What the rules ask the layers above, with a log of the calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def entity(self, label: str, entity_id: str) -> dict[str, Any] | None:
        self.calls.append(("entity", label, entity_id))
        return STORED.get((label, entity_id))

    def price_of(self, model_id: str) -> object | None:
        self.calls.append(("price_of", model_id))
        return {"input": 1.0} if model_id == "priced" else None

    def judge(self, name: Any, options: dict[str, Any]) -> FakeJudge:
        self.calls.append(("judge", name))
        return _judge(name, options)

    def missing_references(self, query_set: dict[str, Any]) -> int:
        return sum(1 for q in query_set["querySetQueries"]
                   if not (q.get("customFields") or {}).get("referenceAnswer"))

    def imported(self, raw: Any) -> list[dict[str, Any]]:
        fields = load(ImportedRatingsSchema(FLOAT_MAX, size_error), {"judgmentRatings": raw})
        ratings: list[dict[str, Any]] = fields["judgmentRatings"]
        return ratings

    def rules(self) -> JudgmentRules:
        return JudgmentRules(
            entity=self.entity, price_of=self.price_of,
            template_error=llm_prompt.validate_template,
            rating_type_error=llm_prompt.validate_rating_type,
            default_template=llm_prompt.DEFAULT_TEMPLATE,
            default_rating_type=llm_prompt.SCORE0_1, click_models=("coec", "pbm"),
            judge=self.judge, missing_references=self.missing_references,
            imported_ratings=self.imported)


def judgment(body: dict[str, Any], cluster: Cluster | None = None) -> dict[str, Any]:
    rules = (cluster or Cluster()).rules()
    return load(judgment_schema(body, rules), body)


def error(schema: Schema, body: dict[str, Any]) -> WorkbenchError:
    with pytest.raises(WorkbenchError) as caught:
        load(schema, body)
    return caught.value


def reason(body: dict[str, Any], cluster: Cluster | None = None) -> str:
    rules = (cluster or Cluster()).rules()
    caught = error(judgment_schema(body, rules), body)
    assert type(caught) is BadRequest
    assert caught.status == 400 and caught.error_type == "illegal_argument_exception"
    return caught.reason


# -- what every type shares -----------------------------------------------------------------------

@pytest.mark.parametrize(("body", "expected"), [
    ({"name": "x"}, "Invalid or missing judgment type"),
    ({"name": "x", "type": "CLICK_JUDGMENT"}, "Invalid or missing judgment type"),
    ({"name": "x", "type": ["LLM_JUDGMENT"]}, "Invalid or missing judgment type"),
    ({"type": "IMPORT_JUDGMENT", "judgmentRatings": []}, "Invalid name: Text cannot be null"),
    ({"name": 7, "type": "IMPORT_JUDGMENT"}, "Field 'name' must be a string"),
    ({"name": "n" * 51, "type": "IMPORT_JUDGMENT", "judgmentRatings": []},
     "Invalid name: Text exceeds maximum length of 50 characters"),
    ({"name": "x", "description": "d" * 251, "type": "IMPORT_JUDGMENT", "judgmentRatings": []},
     "Invalid description: Text exceeds maximum length of 250 characters"),
    # unlike query sets, a judgment's description is not cast: the text rule answers
    ({"name": "x", "description": 3, "type": "IMPORT_JUDGMENT"},
     "Invalid description: Text must be a string"),
    ({"name": "x", "description": "a<b", "type": "nope"},
     "Invalid description: Text contains invalid characters (quotes, backslashes, or HTML tags "
     "are not allowed)"),
])
def test_common_reasons(body: dict[str, Any], expected: str) -> None:
    assert reason(body) == expected


def test_an_unknown_type_has_the_shared_fields_only() -> None:
    assert isinstance(judgment_schema({"type": "X"}, Cluster().rules()), JudgmentSchema)
    assert isinstance(judgment_schema({"type": "LLM_JUDGMENT"}, Cluster().rules()),
                      LlmJudgmentSchema)


# -- LLM_JUDGMENT ---------------------------------------------------------------------------------

def llm(**fields: Any) -> dict[str, Any]:
    body = {"name": "j", "type": "LLM_JUDGMENT", "modelId": "m", "querySetId": "qs",
            "searchConfigurationList": ["c1"]}
    body.update(fields)
    return {k: v for k, v in body.items() if v is not ...}


def test_llm_defaults() -> None:
    fields = judgment(llm(name="  j  ", unknown=1))
    assert fields == {
        "name": "j", "description": None, "type": "LLM_JUDGMENT", "modelId": "m",
        "tokenLimit": 4000, "promptTemplate": llm_prompt.DEFAULT_TEMPLATE,
        "llmJudgmentRatingType": "SCORE0_1", "existingJudgments": [], "size": 10,
        "contextFields": [], "ignoreFailure": False, "overwriteCache": False,
        "includeRationale": False, "expandCoverage": False, "maxTokens": None, "maxCost": None,
        "querySetId": "qs", "searchConfigurationList": ["c1"]}


def test_llm_values_kept() -> None:
    fields = judgment(llm(tokenLimit=" 2000 ", promptTemplate="Q {{queryText}} H {{hits}}",
                          llmJudgmentRatingType="RELEVANT_IRRELEVANT", size=3, modelId="priced",
                          contextFields=["t"], existingJudgments=["e"], ignoreFailure=True,
                          maxTokens=5, maxCost=2, searchConfigurationList=["c1", "c2"]))
    assert (fields["tokenLimit"], fields["promptTemplate"], fields["llmJudgmentRatingType"],
            fields["size"], fields["maxTokens"], fields["maxCost"]) == (
        2000, "Q {{queryText}} H {{hits}}", "RELEVANT_IRRELEVANT", 3, 5, 2.0)
    assert judgment(llm(tokenLimit=1500.9, promptTemplate="  "))["tokenLimit"] == 1500
    assert judgment(llm(promptTemplate="  "))["promptTemplate"] == llm_prompt.DEFAULT_TEMPLATE


@pytest.mark.parametrize(("fields", "expected"), [
    ({"modelId": None}, "modelId is required for LLM_JUDGMENT"),
    ({"modelId": "  "}, "modelId is required for LLM_JUDGMENT"),
    ({"tokenLimit": 999}, "TokenLimit must be between 1000 and 500000, got: 999"),
    ({"tokenLimit": "500001"}, "TokenLimit must be between 1000 and 500000, got: 500001"),
    ({"tokenLimit": "lots"}, "Invalid tokenLimit value. Expected numeric value, got: lots"),
    ({"tokenLimit": True}, "Invalid tokenLimit type. Expected numeric value or string, "
                           "got: Boolean"),
    ({"tokenLimit": [1]}, "Invalid tokenLimit type. Expected numeric value or string, "
                          "got: ArrayList"),
    ({"tokenLimit": {}}, "Invalid tokenLimit type. Expected numeric value or string, "
                         "got: LinkedHashMap"),
    ({"promptTemplate": 5}, "Field 'promptTemplate' must be a string"),
    ({"promptTemplate": "x" * 10001}, "Prompt template exceeds maximum length of 10000 "
                                      "characters"),
    ({"promptTemplate": "Query: {{queryText}}"},
     "Prompt template must include either {{hits}} or {{results}} placeholder to provide "
     "documents for rating. Example: 'Query: {{queryText}}\\n\\nDocuments: {{hits}}'"),
    ({"promptTemplate": "Docs: {{hits}}"},
     "Prompt template must include either {{queryText}} or {{searchText}} placeholder to "
     "provide the search query. Example: 'Query: {{queryText}}\\n\\nDocuments: {{hits}}'"),
    ({"llmJudgmentRatingType": "STARS"},
     "Invalid RatingType: 'STARS'. Valid values are: SCORE0_1, RELEVANT_IRRELEVANT"),
    ({"existingJudgments": ["a", "b", "c", "d", "e", "f"]},
     "Too many existing judgments referenced: 6. Maximum allowed is 5"),
    ({"existingJudgments": "a"}, "existingJudgments must be a list of strings"),
    ({"size": 0}, "size must be a positive integer, got: 0"),
    ({"size": 10**40}, f"size must be at most 10000, got: {10**40}"),
    ({"size": None}, "size is required"),
    ({"contextFields": [1]}, "contextFields must be a list of strings"),
    ({"ignoreFailure": "yes"}, "ignoreFailure must be true or false"),
    ({"includeRationale": 1}, "includeRationale must be true or false"),
    ({"expandCoverage": "true"}, "expandCoverage must be true or false"),
    ({"maxTokens": 0}, "maxTokens must be a positive integer, got: 0"),
    ({"maxCost": 0}, "maxCost must be a number greater than 0, got: 0"),
    ({"maxCost": True}, "maxCost must be a number greater than 0, got: True"),
    ({"maxCost": 1}, "maxCost needs a model with pricing; model [m] has none (register it "
                     "with pricing, or use maxTokens)"),
    ({"querySetId": ""}, "QuerySet ID cannot be null or empty"),
    ({"querySetId": ...}, "QuerySet ID cannot be null or empty"),
    ({"querySetId": "nope"}, "QuerySet [nope] does not exist"),
    ({"searchConfigurationList": ...}, "searchConfigurationList is required for LLM_JUDGMENT"),
    ({"searchConfigurationList": []}, "searchConfigurationList is required for LLM_JUDGMENT"),
    ({"searchConfigurationList": ["nope"]}, "SearchConfiguration [nope] does not exist"),
    ({"searchConfigurationList": [""]}, "SearchConfiguration ID cannot be null or empty"),
    ({"searchConfigurationList": ["c1", 5]}, "SearchConfiguration ID cannot be null or empty"),
])
def test_llm_reasons(fields: dict[str, Any], expected: str) -> None:
    assert reason(llm(**fields)) == expected


def test_llm_reasons_keep_the_order_the_checks_ran_in() -> None:
    # the first of several bad fields answers, in the order of the old checks
    assert reason(llm(tokenLimit=1, size=0, modelId=None)) == \
        "modelId is required for LLM_JUDGMENT"
    assert reason(llm(size=0, tokenLimit=1)) == \
        "TokenLimit must be between 1000 and 500000, got: 1"
    # the query set is looked up before the configurations are checked at all
    assert reason(llm(querySetId="nope", searchConfigurationList=None)) == \
        "QuerySet [nope] does not exist"
    assert reason(llm(searchConfigurationList=["c1", "nope", ""])) == \
        "SearchConfiguration [nope] does not exist"
    assert reason({"name": 'a"b', "type": "LLM_JUDGMENT"}) == \
        "Invalid name: Text contains invalid characters (quotes, backslashes, or HTML tags are " \
        "not allowed)"


def test_no_service_is_asked_once_a_field_failed() -> None:
    cluster = Cluster()
    reason(llm(size=0, maxCost=1, querySetId="nope", searchConfigurationList=["c1"]), cluster)
    assert cluster.calls == []
    cluster = Cluster()
    reason(llm(searchConfigurationList=["nope", "c1"]), cluster)
    assert cluster.calls == [("entity", "QuerySet", "qs"),
                             ("entity", "SearchConfiguration", "nope"),
                             ("entity", "RemoteSearchConfiguration", "nope")]  # issue 47
    cluster = Cluster()
    reason(llm(name=None), cluster)
    assert cluster.calls == []
    cluster = Cluster()
    judgment(llm(modelId="priced", maxCost=0.5), cluster)
    assert cluster.calls[0] == ("price_of", "priced")


def test_estimate_checks_its_type_first() -> None:
    rules = Cluster().rules()
    for body, expected in (
            ({"name": 'a"b'}, "type must be LLM_JUDGMENT to estimate a judgment, got: None"),
            ({"type": "UBI_JUDGMENT"},
             "type must be LLM_JUDGMENT to estimate a judgment, got: UBI_JUDGMENT"),
            (llm(name=None), "Invalid name: Text cannot be null"),
            (llm(tokenLimit=5), "TokenLimit must be between 1000 and 500000, got: 5")):
        caught = error(LlmEstimateSchema(rules), body)
        assert (type(caught), caught.reason) == (BadRequest, expected)
    assert load(LlmEstimateSchema(rules), llm())["type"] == "LLM_JUDGMENT"


# -- UBI_JUDGMENT ---------------------------------------------------------------------------------

def ubi(**fields: Any) -> dict[str, Any]:
    return {"name": "u", "type": "UBI_JUDGMENT", **fields}


def test_ubi_defaults() -> None:
    """No events index named (absent, null, empty or blank) loads as None: the create then
    reads ``ubi_events`` and words a refusal as "not given" (plugin #558)."""
    for named in ({}, {"ubiEventsIndex": None}, {"ubiEventsIndex": ""},
                  {"ubiEventsIndex": "  "}):
        assert judgment(ubi(clickModel="COEC", maxRank=20, startDate="", endDate=None,
                            **named)) == {
            "name": "u", "description": None, "type": "UBI_JUDGMENT", "clickModel": "COEC",
            "maxRank": 20, "startDate": "", "endDate": "", "ubiEventsIndex": None}
    assert judgment(ubi(clickModel="COEC", maxRank=20, ubiEventsIndex="ubi_events"))[
        "ubiEventsIndex"] == "ubi_events"


@pytest.mark.parametrize(("fields", "expected"), [
    ({"maxRank": 20}, "clickModel is required for UBI_JUDGMENT"),
    ({"clickModel": "dbn", "maxRank": 20}, "Unsupported click model: dbn"),
    ({"clickModel": 5, "maxRank": 20}, "Unsupported click model: 5"),
    ({"clickModel": "coec"}, "maxRank is required"),
    ({"clickModel": "coec", "maxRank": 0}, "maxRank must be a positive integer, got: 0"),
    ({"clickModel": "coec", "maxRank": "20"}, "maxRank must be a positive integer, got: 20"),
    ({"clickModel": "coec", "maxRank": 10**40}, f"maxRank must be at most 10000, got: {10**40}"),
    ({"clickModel": "coec", "maxRank": 20, "startDate": "2024/12/01"},
     "Invalid start date format: failed to parse date field [2024/12/01] with format "
     "[yyyy-MM-dd]"),
    ({"clickModel": "coec", "maxRank": 20, "endDate": "2025-02-30"},
     "Invalid end date format: failed to parse date field [2025-02-30] with format "
     "[yyyy-MM-dd]"),
    ({"clickModel": "coec", "maxRank": 20, "startDate": 5}, "Field 'startDate' must be a string"),
    ({"clickModel": "coec", "maxRank": 20, "ubiEventsIndex": 5},
     "Field 'ubiEventsIndex' must be a string"),
])
def test_ubi_reasons(fields: dict[str, Any], expected: str) -> None:
    assert reason(ubi(**fields)) == expected


# -- REFERENCE_JUDGMENT ---------------------------------------------------------------------------

def reference(**fields: Any) -> dict[str, Any]:
    body = {"name": "r", "type": "REFERENCE_JUDGMENT", "judge": "overlap",
            "querySetId": "qs-ref", "searchConfigurationList": ["c1"]}
    body.update(fields)
    return {k: v for k, v in body.items() if v is not ...}


def test_reference_fields() -> None:
    fields = judgment(reference(threshold=0.4, judgeOptions={"k": 1}))
    choice = fields.pop("judge")
    assert isinstance(choice, ChosenJudge)
    assert (choice.name, choice.options, choice.judge.threshold) == (
        "overlap", {"k": 1, "threshold": 0.4}, 0.4)
    assert fields == {"name": "r", "description": None, "type": "REFERENCE_JUDGMENT",
                      "size": 10, "contextFields": [], "querySetId": "qs-ref",
                      "searchConfigurationList": ["c1"]}
    # an option's own threshold wins over the top-level one
    assert judgment(reference(threshold=0.4, judgeOptions={"threshold": 0.9})
                    )["judge"].options == {"threshold": 0.9}


@pytest.mark.parametrize(("fields", "expected"), [
    ({"judge": None}, "judge is required for REFERENCE_JUDGMENT"),
    ({"judgeOptions": None}, "judgeOptions must be an object"),
    ({"judgeOptions": [1]}, "judgeOptions must be an object"),
    ({"judge": "llm"}, "Unknown judge [llm]; use one of: overlap, exact"),
    ({"judgeOptions": {"bad": 1}}, "option bad is not known"),
    ({"size": 0}, "size must be a positive integer, got: 0"),
    ({"querySetId": "nope"}, "QuerySet [nope] does not exist"),
    ({"querySetId": "qs"}, "QuerySet [qs] has 1 queries without a referenceAnswer; the overlap "
                           "judge compares results with it"),
    ({"searchConfigurationList": None},
     "searchConfigurationList is required for REFERENCE_JUDGMENT"),
])
def test_reference_reasons(fields: dict[str, Any], expected: str) -> None:
    assert reason(reference(**fields)) == expected


def test_a_judge_without_references_takes_any_query_set() -> None:
    assert judgment(reference(judge="exact", querySetId="qs"))["querySetId"] == "qs"


def test_the_judge_is_not_built_once_a_field_failed() -> None:
    cluster = Cluster()
    reason(reference(name=None), cluster)
    assert cluster.calls == []


# -- IMPORT_JUDGMENT ------------------------------------------------------------------------------

def imported(ratings: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": "bad", "type": "IMPORT_JUDGMENT"}
    if ratings is not None:
        body["judgmentRatings"] = ratings
    return body


def test_imported_ratings_as_stored() -> None:
    ratings = [{"query": "red shoes", "ratings": [{"docId": "B1", "rating": "2.5"},
                                                  {"docId": "B1", "rating": 1},
                                                  {"docId": 7, "rating": " 1e1 "}]},
               {"query": 12, "ratings": []}]
    assert judgment(imported(ratings))["judgmentRatings"] == [
        {"query": "red shoes", "ratings": [{"docId": "B1", "rating": "1"},
                                           {"docId": "7", "rating": " 1e1 "}]},
        {"query": "12", "ratings": []}]


def test_imported_ratings_keep_what_is_already_as_stored() -> None:
    """A rating given as stored is the same object in the stored list (no second copy of a
    large import); any other is a new one, and the body is left as it was."""
    kept = {"docId": "B1", "rating": "2"}
    numeric = {"docId": "B2", "rating": 1}
    reordered = {"rating": "3", "docId": "B3"}
    extra = {"docId": "B4", "rating": "1", "note": "x"}
    raw = [{"query": "q", "ratings": [kept, numeric, reordered, extra]}]
    (entry,) = imported_ratings(raw, FLOAT_MAX, size_error)
    assert entry["ratings"] == [{"docId": "B1", "rating": "2"}, {"docId": "B2", "rating": "1"},
                                {"docId": "B3", "rating": "3"}, {"docId": "B4", "rating": "1"}]
    assert [r is kept for r in entry["ratings"]] == [True, False, False, False]
    assert list(entry["ratings"][2]) == ["docId", "rating"]
    assert numeric == {"docId": "B2", "rating": 1} and "note" in extra


def test_a_loaded_schema_keeps_no_reference_to_the_body() -> None:
    """A schema and its fields form a cycle, freed only when the cycle collector runs: after
    ``load`` it holds neither the body nor the loaded values, so a large body is freed with the
    request."""
    schema = ImportedRatingsSchema(FLOAT_MAX, size_error)
    load(schema, {"judgmentRatings": [{"query": "q", "ratings": [{"docId": "d", "rating": 1}]}]})
    assert all("body" not in vars(field) for field in schema.fields.values())
    for body in ({"reference": "a", "candidateJudgmentId": "b", "candidateThreshold": 2},
                 {"reference": "a", "candidate": "nope"}):
        step_schema = compare()
        with contextlib.suppress(WorkbenchError):
            load(step_schema, body)
        assert step_schema.loaded == {}
        assert all("body" not in vars(field) for field in step_schema.fields.values())


@pytest.mark.parametrize(("ratings", "expected"), [
    ([{"query": "q", "ratings": "nope"}], "queryText q must have a list of rating data."),
    ([{"query": "q"}], "queryText q must have a list of rating data."),
    ([{"query": "q", "ratings": [5]}], "queryText q must have a list of rating data."),
    ([{"query": "q", "ratings": [{"docId": "", "rating": "1"}]}],
     "docId for queryText q must not be null or empty"),
    ([{"query": "q", "ratings": [{"rating": "1"}]}],
     "docId for queryText q must not be null or empty"),
    ([{"query": "q", "ratings": [{"docId": "d"}]}], "rating for queryText q must not be null"),
    ([{"query": "q", "ratings": [{"docId": "d", "rating": "high"}]}],
     "rating 'high' for queryText q must be a valid float"),
    ([{"query": "q", "ratings": [{"docId": "d", "rating": "NaN"}]}],
     "rating 'NaN' for queryText q must be a valid float"),
    # Java's Float.parseFloat reads ASCII digits only, and trims only up to the space
    ([{"query": "q", "ratings": [{"docId": "d", "rating": "\u0663"}]}],
     "rating '\u0663' for queryText q must be a valid float"),
    ([{"query": "q", "ratings": [{"docId": "d", "rating": "\u00a01"}]}],
     "rating '\u00a01' for queryText q must be a valid float"),
    ([{"query": "q", "ratings": [{"docId": "d", "rating": "Infinity"}]}],
     "rating 'Infinity' for queryText q must be a valid float"),
    ([{"query": "q", "ratings": [{"docId": "d", "rating": True}]}],
     "rating 'true' for queryText q must be a valid float"),
    ([{"query": "red shoes", "ratings": [{"docId": "B2", "rating": "3.5e38f"}]}],
     f"rating '3.5e38f' for queryText red shoes and docId B2 is outside the float range "
     f"(at most {FLOAT_MAX} in magnitude)"),
    ([{"ratings": []}], "each judgmentRatings entry must have a query and a list of ratings"),
    ("q", "judgmentRatings must be a list of {query, ratings} objects"),
    (None, "judgmentRatings is required for IMPORT_JUDGMENT"),
])
def test_import_reasons(ratings: Any, expected: str) -> None:
    assert reason(imported(ratings)) == expected


def test_the_largest_float_is_accepted_and_a_list_over_the_limit_is_not() -> None:
    largest = [{"query": "q", "ratings": [{"docId": "B1", "rating": "3.4028235e38"}]}]
    assert judgment(imported(largest))["judgmentRatings"] == largest
    over = [{"query": f"q{i}", "ratings": []} for i in range(MAX_RATINGS + 1)]
    assert reason(imported(over)) == (f"judgment has {MAX_RATINGS + 1} queries; at most "
                                      f"{MAX_RATINGS} are allowed in one judgment list")


# -- PUT /judgments/{id} --------------------------------------------------------------------------

def test_edits_are_the_text_the_plugin_reads() -> None:
    """Each value as Java's ``String.valueOf`` of the parsed JSON: the plugin stores the rating
    as that text (``1`` is ``"1"``, ``1.0`` is ``"1.0"``, ``"1"`` is ``"1"``)."""
    body = {"judgmentRatings": [{"query": 12, "ratings": [
        {"docId": "d", "rating": "0.7"}, {"docId": 3, "rating": 0}, {"docId": 0, "rating": 1},
        {"docId": "e", "rating": 1.0}, {"docId": "f", "rating": "1"},
        {"docId": "g", "rating": 0.5}, {"docId": False, "rating": " 1 "},
        {"docId": "h", "rating": 1e-5}]}]}
    assert load(RatingEditsSchema(), body)["judgmentRatings"] == [
        ("12", "d", "0.7"), ("12", "3", "0"), ("12", "0", "1"), ("12", "e", "1.0"),
        ("12", "f", "1"), ("12", "g", "0.5"), ("12", "false", " 1 "), ("12", "h", "1.0E-5")]


@pytest.mark.parametrize(("body", "expected"), [
    ({}, "judgmentRatings is required"),
    ({"judgmentRatings": {}}, "expected a list of {query, ratings:[{docId, rating}]} objects"),
    ({"judgmentRatings": [1]}, "expected a list of {query, ratings:[{docId, rating}]} objects"),
    ({"judgmentRatings": [{"query": "q"}]}, "each entry must have a ratings list"),
    ({"judgmentRatings": [{"query": "q", "ratings": None}]},
     "each entry must have a ratings list"),
    ({"judgmentRatings": [{"query": "q", "ratings": "r"}]},
     "expected a list of {query, ratings:[{docId, rating}]} objects"),
    ({"judgmentRatings": [{"query": "q", "ratings": [1]}]},
     "expected a list of {query, ratings:[{docId, rating}]} objects"),
    ({"judgmentRatings": [{"query": "q", "ratings": [{"docId": "d"}]}]},
     "each rating must have a query, docId and rating"),
    ({"judgmentRatings": [{"query": "", "ratings": [{"docId": "d", "rating": 1}]}]},
     "each rating must have a query, docId and rating"),
    ({"judgmentRatings": [{"query": " \t", "ratings": [{"docId": "d", "rating": 1}]}]},
     "each rating must have a query, docId and rating"),
    ({"judgmentRatings": [{"query": "q", "ratings": [{"docId": "d", "rating": "  "}]}]},
     "each rating must have a query, docId and rating"),
    # the whole list is read before a missing value is reported
    ({"judgmentRatings": [{"query": "q", "ratings": [{"docId": "d"}]}, {"query": "q"}]},
     "each entry must have a ratings list"),
    ({"judgmentRatings": [{"query": "q", "ratings": []}]}, "at least one rating is required"),
    ({"judgmentRatings": []}, "at least one rating is required"),
])
def test_edit_reasons(body: dict[str, Any], expected: str) -> None:
    """The plugin's REST handler answers these as a bare text/plain 400."""
    with pytest.raises(TextError) as caught:
        load(RatingEditsSchema(), body)
    assert (caught.value.status, caught.value.text) == (400, expected)


@pytest.mark.parametrize(("text", "number"), [
    ("1", 1.0), (" 0.5\n", 0.5), ("1d", 1.0), ("0.5F", 0.5), (".5", 0.5), ("1.", 1.0),
    ("-0", -0.0), ("1e-400", 0.0), ("0x1p-1", 0.5), ("0X.8P0d", 0.5), ("NaN", math.nan),
    ("-Infinity", -math.inf), ("1e400", math.inf),
    ("high", None), ("", None), ("inf", None), ("nan", None), ("1_0", None), ("0x1", None),
    ("1e", None), ("--1", None), ("\u0661", None), ("1\n2", None),
])
def test_java_double(text: str, number: float | None) -> None:
    parsed = java_double(text)
    if number is None or parsed is None:
        assert parsed is number
    elif math.isnan(number):
        assert math.isnan(parsed)
    else:
        assert (parsed, math.copysign(1, parsed)) == (number, math.copysign(1, number))


@pytest.mark.parametrize(("text", "rating_type", "expected"), [
    ("1.5", "SCORE0_1", "rating '1.5' for docId d must be a number between 0 and 1 for a "
                        "SCORE0_1 judgment"),
    ("NaN", "SCORE0_1", "rating 'NaN' for docId d must be a number between 0 and 1 for a "
                        "SCORE0_1 judgment"),
    ("high", "SCORE0_1", "rating 'high' for docId d must be a number for a SCORE0_1 judgment"),
    ("true", "SCORE0_1", "rating 'true' for docId d must be a number for a SCORE0_1 judgment"),
    ("0.5", "RELEVANT_IRRELEVANT", "rating '0.5' for docId d must be 0 or 1 for a "
                                   "RELEVANT_IRRELEVANT judgment"),
    ("x", "RELEVANT_IRRELEVANT", "rating 'x' for docId d must be a number for a "
                                 "RELEVANT_IRRELEVANT judgment"),
])
def test_scale_reasons(text: str, rating_type: str, expected: str) -> None:
    with pytest.raises(SearchRelevanceError) as caught:
        check_scale([("q", "d", text)], rating_type)
    assert (caught.value.status, caught.value.reason) == (400, expected)
    assert caught.value.body()["error"]["type"] == "search_relevance_exception"


def test_every_rating_is_checked_before_anything_else() -> None:
    edits = [("q", "a", "0.5"), ("q", "b", "2")]
    with pytest.raises(SearchRelevanceError) as caught:
        check_scale(edits, "SCORE0_1")
    assert caught.value.reason.startswith("rating '2' for docId b")
    check_scale([("q", "a", "1"), ("q", "b", "0.0"), ("q", "c", " 1d ")], "RELEVANT_IRRELEVANT")
    check_scale([("q", "a", "0"), ("q", "b", "1.0"), ("q", "c", "0x1p-2")], "SCORE0_1")


@pytest.mark.parametrize(("metadata", "expected"), [
    ({}, "SCORE0_1"), ({"llmJudgmentRatingType": None}, "SCORE0_1"),
    ({"llmJudgmentRatingType": 3}, "SCORE0_1"),
    ({"llmJudgmentRatingType": "RELEVANT_IRRELEVANT"}, "RELEVANT_IRRELEVANT"),
])
def test_the_recorded_rating_type(metadata: dict[str, Any], expected: str) -> None:
    assert rating_type_of(metadata) == expected


@pytest.mark.parametrize("value", ["score0_1", "", "GRADED"])
def test_an_unrecognized_rating_type_is_refused_with_its_cause(value: str) -> None:
    with pytest.raises(SearchRelevanceError) as caught:
        rating_type_of({"llmJudgmentRatingType": value})
    reason = f"Judgment records an unrecognized rating type [{value}]; cannot edit ratings"
    assert caught.value.body() == {"error": {
        "root_cause": [{"type": "search_relevance_exception", "reason": reason}],
        "type": "search_relevance_exception", "reason": reason,
        "caused_by": {"type": "illegal_argument_exception", "reason": "No enum constant "
                      f"org.opensearch.searchrelevance.model.LLMJudgmentRatingType.{value}"}},
        "status": 400}


def test_apply_edits() -> None:
    entries: list[dict[str, Any]] = [
        {"query": "q", "ratings": [{"docId": "a", "rating": "0.1"}],
         "failures": [{"docId": "b", "reason": "x"}, {"docId": "c"}]},
        {"query": "q", "ratings": [{"docId": "z", "rating": "0.2"}]},
        {"query": "r"}]
    apply_edits(entries, [("q", "a", "1"), ("q", "b", "0.5")])
    assert entries[0] == {"query": "q", "ratings": [{"docId": "a", "rating": "1"},
                                                    {"docId": "b", "rating": "0.5"}],
                          "failures": [{"docId": "c"}]}
    apply_edits(entries, [("q", "c", "0")])
    assert "failures" not in entries[0]
    with pytest.raises(SearchRelevanceError) as caught:
        apply_edits(entries, [("q", "z", "0")])  # the first entry of a query is the one edited
    assert (caught.value.status, caught.value.reason) == (
        400, "Document z is not part of query [q] in this judgment")
    with pytest.raises(SearchRelevanceError) as caught:
        apply_edits(entries, [("nope", "a", "0")])
    assert (caught.value.status, caught.value.reason) == (404, "Query not found in judgment: nope")


# -- POST /judgments/_compare ---------------------------------------------------------------------

LISTS = {"a": {"status": "COMPLETED", "judgmentRatings": [{"query": "q", "ratings": [
    {"docId": "d", "rating": "1"}]}]},
         "b": {"status": "COMPLETED", "judgmentRatings": []},
         "p": {"status": "PROCESSING"}}


def compare(looked: list[str] | None = None) -> CompareSchema:
    def completed(judgment_id: str) -> dict[str, Any]:
        if looked is not None:
            looked.append(judgment_id)
        doc = LISTS.get(judgment_id)
        if doc is None:
            raise NotFound(f"Judgment not found: {judgment_id}")
        if doc["status"] != "COMPLETED":
            raise Conflict(f"Judgment [{judgment_id}] is {doc['status']}")
        return doc

    def default_threshold(ratings: list[dict[str, Any]]) -> float:
        if not ratings:
            raise ValueError("no ratings")
        return 0.5

    return CompareSchema(CompareRules(completed, default_threshold))


def test_compare_fields() -> None:
    body = {"reference": "a", "candidateJudgmentId": "b", "candidateThreshold": 2}
    fields = load(compare(), body)
    assert fields == {"reference": "a", "candidate": "b",
                      "lists": {"reference": LISTS["a"], "candidate": LISTS["b"]},
                      "referenceThreshold": 0.5, "candidateThreshold": 2.0}


@pytest.mark.parametrize(("body", "status", "expected"), [
    ({}, 400, "referenceJudgmentId is required"),
    ({"referenceJudgmentId": None, "reference": "a", "candidate": "b"}, 400,
     "referenceJudgmentId is required"),
    ({"referenceJudgmentId": "a", "candidateJudgmentId": " "}, 400,
     "candidateJudgmentId is required"),
    ({"referenceJudgmentId": "a", "candidateJudgmentId": "a"}, 400,
     "A judgment list cannot be compared with itself; give two different judgment ids"),
    ({"referenceJudgmentId": "x", "candidateJudgmentId": "p", "referenceThreshold": "hi"}, 404,
     "Judgment not found: x"),
    ({"referenceJudgmentId": "a", "candidateJudgmentId": "p"}, 409, "Judgment [p] is PROCESSING"),
    ({"referenceJudgmentId": "a", "candidateJudgmentId": "b", "referenceThreshold": "hi"}, 400,
     "referenceThreshold must be a number, got: hi"),
    ({"referenceJudgmentId": "b", "candidateJudgmentId": "a", "candidateThreshold": True}, 400,
     "no ratings"),
    ({"referenceJudgmentId": "a", "candidateJudgmentId": "b"}, 400, "no ratings"),
])
def test_compare_reasons(body: dict[str, Any], status: int, expected: str) -> None:
    caught = error(compare(), body)
    assert (caught.status, caught.reason) == (status, expected)


def test_compare_looks_nothing_up_for_a_bad_body() -> None:
    looked: list[str] = []
    body = {"referenceJudgmentId": "a", "candidateJudgmentId": "", "referenceThreshold": "x"}
    assert error(compare(looked), body).reason == "candidateJudgmentId is required"
    assert looked == []
