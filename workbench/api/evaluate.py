"""``POST /_plugins/_search_relevance/_evaluate``: score one query's result list on the spot.

The request shapes are in ``workbench.evaluation`` (``workbench_shape``); judging and scoring in
``workbench.evaluation.run``. A judge that cannot judge is a 502 naming it; a bad option, an
unknown judge or an unknown model is a 400.
"""

from __future__ import annotations

from flask import Blueprint, Response

from workbench.api import json_body, json_response, services
from workbench.errors import BadRequest, WorkbenchError
from workbench.evaluation import workbench_shape
from workbench.evaluation.run import evaluate as run
from workbench.judges.base import JudgeFailed, OptionError
from workbench.judges.registry import BrokenJudge, UnknownJudge
from workbench.llm.mlcommons import UnknownModel

bp = Blueprint("evaluate", __name__)


class BadGateway(WorkbenchError):
    status = 502
    error_type = "llm_exception"


class JudgeUnavailable(WorkbenchError):
    """An installed judge that cannot be loaded: the server's setup, not the request."""

    status = 500
    error_type = "judge_exception"


@bp.post("/_evaluate")
def evaluate() -> Response:
    body = json_body()
    assert body is not None
    svc = services()
    request = workbench_shape.parse(svc, body)
    try:
        return json_response(workbench_shape.render(run(svc, request)))
    except (OptionError, UnknownJudge) as exc:
        raise BadRequest(str(exc)) from exc
    except BrokenJudge as exc:
        raise JudgeUnavailable(str(exc)) from exc
    except JudgeFailed as exc:
        raise BadGateway(str(exc)) from exc
    except UnknownModel as exc:
        raise BadRequest(exc.reason) from exc
