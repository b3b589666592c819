"""Which task the lease sweeper queues a lost entity to: its status's, unless its type has a task
of its own (an experiment's filled judgment list is run by ``workbench.holes.fill``, not by the
judgment generation, which ignores it)."""

from __future__ import annotations

from workbench.jobs.sweeper import WATCHED, task_for
from workbench.store.indices import EXPERIMENT_INDEX, JUDGMENT_INDEX

JUDGMENTS = WATCHED[JUDGMENT_INDEX][1]


def test_a_filled_judgment_goes_to_the_fill_task() -> None:
    assert task_for(JUDGMENT_INDEX, JUDGMENTS,
                    {"status": "PROCESSING", "type": "FILLED_JUDGMENT"}) == "workbench.holes.fill"
    # (it is never RETRYING: _retry refuses every type but LLM_JUDGMENT)
    assert task_for(JUDGMENT_INDEX, JUDGMENTS,
                    {"status": "RETRYING", "type": "FILLED_JUDGMENT"}) is None


def test_other_judgments_go_to_their_status_task() -> None:
    for kind in ("LLM_JUDGMENT", "IMPORT_JUDGMENT", "UBI_JUDGMENT", "REFERENCE_JUDGMENT", None):
        assert task_for(JUDGMENT_INDEX, JUDGMENTS, {"status": "PROCESSING", "type": kind}) == (
            "workbench.judgments.generate")
    assert task_for(JUDGMENT_INDEX, JUDGMENTS, {"status": "RETRYING", "type": "LLM_JUDGMENT"}) \
        == "workbench.judgments.retry"
    assert task_for(JUDGMENT_INDEX, JUDGMENTS, {"status": "COMPLETED"}) is None
    experiments = WATCHED[EXPERIMENT_INDEX][1]
    assert task_for(EXPERIMENT_INDEX, experiments, {"status": "PROCESSING",
                                                    "type": "FILLED_JUDGMENT"}) == (
        "workbench.experiments.run")
