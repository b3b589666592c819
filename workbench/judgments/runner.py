"""The judgment jobs: load the PROCESSING (or RETRYING) document by id, generate, write back.

A job is idempotent: it acts only on a document still in the state it was queued for, and its
final write is conditional on the version it read, so a redelivered job never overwrites a
finished, edited or deleted judgment.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from opensearchpy.exceptions import ConflictError, NotFoundError

from workbench.jobs.base import JobFailed, keep_metadata
from workbench.jobs.control import JobControl
from workbench.judgments import imported, reference_job, ubi
from workbench.judgments.limits import size_error
from workbench.judgments.llm import generation as llm_generation
from workbench.services import Services
from workbench.store.identity import carry
from workbench.store.indices import JUDGMENT_INDEX
from workbench.store.repository import Repository
from workbench.telemetry import instruments

log = logging.getLogger(__name__)

#: the type of an experiment's filled judgment list (workbench/holes), run by its own task
FILLED = "FILLED_JUDGMENT"

EVENTS = {
    "IMPORT_JUDGMENT": "import_judgment_rating_generations",
    "UBI_JUDGMENT": "ubi_judgment_rating_generations",
    "LLM_JUDGMENT": "llm_judgment_rating_generations",
}


def repository(svc: Services) -> Repository:
    return Repository(svc.client, JUDGMENT_INDEX)


def generate(svc: Services, judgment_id: str) -> None:
    repo = repository(svc)
    hit = repo.get_hit(judgment_id)
    if hit is None or hit["_source"].get("status") != "PROCESSING":
        log.info("judgment %s is not PROCESSING (deleted or done); nothing to do", judgment_id)
        return
    doc = hit["_source"]
    if doc.get("type") == FILLED:
        # an experiment's holes are filled by their own task (workbench/holes/tasks.py)
        log.info("judgment %s is a %s, not generated here; nothing to do", judgment_id, FILLED)
        return
    instruments.note_job_type(doc.get("type"))
    control = JobControl(svc, JUDGMENT_INDEX, hit, "queries", in_metadata=True)
    control.check()  # cancelled while queued
    metadata = doc.get("metadata") or {}
    with settled(control), counting(svc, EVENTS.get(doc["type"])) as counted, \
            keeping_usage(control):
        if doc["type"] == "IMPORT_JUDGMENT":
            ratings = imported.build(metadata.get("judgmentRatings"))
            metadata = {}
        elif doc["type"] == "UBI_JUDGMENT":
            ratings = ubi.generate(svc.client, metadata)
        elif doc["type"] == "REFERENCE_JUDGMENT":
            ratings, metadata = reference_job.generate(svc, metadata, judgment_id, control)
        else:
            ratings, metadata = llm_generation.generate(svc, judgment_id, metadata, control)
        control.check()
        counted()
    write(repo, hit, {"status": "COMPLETED", "metadata": metadata, "judgmentRatings": ratings})


@contextmanager
def settled(control: JobControl) -> Iterator[None]:
    """However the work ends, a progress write still on its way (``JobControl.start`` with
    ``wait=False``) is awaited: the finished or ERROR document is written after it, and the
    final write's condition is the version it left in ``hit``."""
    try:
        yield
    finally:
        control.settle()


@contextmanager
def counting(svc: Services, event: str | None) -> Iterator[Callable[[], None]]:
    """Count the job's SRW ``event`` (the plugin's counters know only its own three types:
    None for the others) while the job works: whether stats are on is a read of the settings,
    a round trip the job need not wait for before it starts. The caller calls what this yields
    before the finished document is written, so a client that reads COMPLETED finds the count
    made (and a failed read fails the job as it did when it was made first); however the job
    ends, the count is awaited."""
    if event is None:
        yield lambda: None
        return
    with ThreadPoolExecutor(1, thread_name_prefix="event") as pool:
        made = pool.submit(carry(svc.record_event), event)
        yield made.result


@contextmanager
def keeping_usage(control: JobControl) -> Iterator[None]:
    """However the job ends (a cancel, a documented failure, a crash), its ERROR document keeps
    ``metadata.usage``: what the calls made so far cost."""
    try:
        yield
    except Exception as exc:
        if control.spent is not None:
            keep_metadata(exc, usage=control.spent())
        raise


def retry(svc: Services, judgment_id: str) -> None:
    repo = repository(svc)
    hit = repo.get_hit(judgment_id)
    if hit is None or hit["_source"].get("status") != "RETRYING":
        log.info("judgment %s is not RETRYING; nothing to do", judgment_id)
        return
    instruments.note_job_type(hit["_source"].get("type"))
    control = JobControl(svc, JUDGMENT_INDEX, hit, "queries", in_metadata=True)
    control.check()
    with settled(control), keeping_usage(control):
        ratings, metadata = llm_generation.retry_failed(svc, judgment_id, hit["_source"],
                                                        control)
        control.check()
    write(repo, hit, {"status": "COMPLETED", "metadata": metadata, "judgmentRatings": ratings})


def write(repo: Repository, hit: dict[str, Any], fields: dict[str, Any]) -> None:
    """Replace the document with its finished form, unless it changed since it was read (or
    since the job's last progress write, which keeps ``hit``'s version current). A list
    too big to store fails the job here, before anything is written (UBI and LLM lists are
    sized only once generated)."""
    error = size_error(fields["judgmentRatings"])
    if error:
        raise JobFailed(error)
    doc = {**hit["_source"], **fields}
    try:
        repo.put(doc, seq_no=hit["_seq_no"], primary_term=hit["_primary_term"])
    except (ConflictError, NotFoundError):
        # A write sent again after its node died may find its own first attempt applied.
        if not repo.holds(doc["id"], fields):
            log.warning("judgment %s changed or was deleted while its job ran; result "
                        "dropped", doc["id"])
