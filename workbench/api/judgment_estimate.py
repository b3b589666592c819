"""``POST /_plugins/_search_relevance/judgments/_estimate``: the calls, tokens and cost of an
LLM judgment before it is created, answered synchronously as the caller.

The body is exactly the body of an ``LLM_JUDGMENT`` create and is checked by the same code
(same messages); nothing is stored and no model is called.
"""

from __future__ import annotations

from flask import Blueprint, Response

from workbench.api import caller, json_body, json_response, services
from workbench.api.deadlines import sync_deadline
from workbench.errors import BadRequest
from workbench.jobs.base import JobFailed
from workbench.judgments.create import judgment_rules, new_judgment
from workbench.judgments.llm import estimate as llm_estimate
from workbench.llm.base import LLMError
from workbench.llm.pricing import Pricing, pricing_of
from workbench.schemas.body import load
from workbench.schemas.judgments import LlmEstimateSchema

bp = Blueprint("judgment_estimate", __name__, url_prefix="/judgments")


def price_of(model_id: str) -> Pricing | None:
    """The prices of a model registered with the workbench (read as the caller)."""
    return pricing_of(services().models.get(model_id))


@bp.post("/_estimate")
def estimate_judgment() -> Response:
    body = json_body()
    assert body is not None
    client = services().client
    rules = judgment_rules(client, price_of)
    fields = load(LlmEstimateSchema(rules), body)
    metadata = new_judgment(client, fields, rules)["metadata"]
    caller.refuse_unless_searchable(metadata["searchConfigurationList"])
    try:
        with sync_deadline("judgments/_estimate"):
            return json_response(llm_estimate.estimate(services(), metadata))
    except (JobFailed, LLMError) as exc:  # what would end the job ERROR before any call
        raise BadRequest(str(exc)) from None
