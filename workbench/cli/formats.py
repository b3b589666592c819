"""File formats of the command line: query sets, judgments (CSV, JSON, TREC qrels) in; TREC run
and qrels files out.

Pure functions over text, so the parsing rules are tested without a server. SRW matches judgments
to queries by their exact text, so everything that comes with TREC query ids (qids) is translated
to query text with a topics mapping, and exports translate back the same way.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

# the API's judgmentRatings: [{"query": ..., "ratings": [{"docId": ..., "rating": ...}]}]
Ratings = list[dict[str, Any]]


class FormatError(ValueError):
    """A file that cannot be read as the format it claims (the message names the line)."""


# query sets ---------------------------------------------------------------------------------

def parse_queries(text: str, fmt: str = "auto") -> list[dict[str, Any]]:
    """Query-set entries (``{"queryText": ..., custom fields...}``) from a file's text.

    Formats: ``text`` (one query per line, blank lines skipped), ``json`` (a list of strings or
    objects, or a ``PUT /query_sets`` body with ``querySetQueries``) and ``ndjson`` (one object
    per line). ``auto`` picks JSON when the whole text parses as a list or object, NDJSON when
    every line is a JSON object, text otherwise.
    """
    fmt = _detect_queries(text) if fmt == "auto" else fmt
    if fmt == "text":
        return [{"queryText": line.strip()} for line in text.splitlines() if line.strip()]
    if fmt == "json":
        data = _json(text)
        if isinstance(data, dict):
            data = data.get("querySetQueries")
        if not isinstance(data, list):
            raise FormatError("a JSON query set is a list of queries or an object with "
                              "querySetQueries")
        return [_query_entry(item, n) for n, item in enumerate(data, 1)]
    if fmt == "ndjson":
        return [_query_entry(_json(line, n), n) for n, line in _lines(text)]
    raise FormatError(f"unknown query-set format {fmt!r}")


def _detect_queries(text: str) -> str:
    try:
        whole = json.loads(text)
    except ValueError:
        whole = None
    if isinstance(whole, list) or (isinstance(whole, dict) and "querySetQueries" in whole):
        return "json"
    if isinstance(whole, dict) or (text.lstrip()[:1] == "{" and _all_objects(text)):
        return "ndjson"
    return "text"


def _all_objects(text: str) -> bool:
    for _, line in _lines(text):
        try:
            if not isinstance(json.loads(line), dict):
                return False
        except ValueError:
            return False
    return True


def _query_entry(item: Any, n: int) -> dict[str, Any]:
    if isinstance(item, str):
        return {"queryText": item}
    if isinstance(item, dict) and "queryText" in item:
        return dict(item)
    raise FormatError(f"query {n}: expected a string or an object with queryText, got "
                      f"{json.dumps(item)[:80]}")


# judgments ----------------------------------------------------------------------------------

def parse_judgments(text: str, fmt: str, topics: Mapping[str, str] | None = None,
                    qid_as_query: bool = False) -> Ratings:
    """The API's ``judgmentRatings`` from CSV, JSON or TREC qrels text."""
    if fmt == "csv":
        return _group(_csv_rows(text))
    if fmt == "json":
        return _json_ratings(_json(text))
    if fmt == "qrels":
        return _group(_qrels_rows(text, topics, qid_as_query))
    raise FormatError(f"unknown judgments format {fmt!r}")


def judgments_format(path: str, text: str) -> str:
    """``csv``, ``json`` or ``qrels`` from the file name, else from the content."""
    lower = path.lower().removesuffix(".gz")
    for suffix, fmt in ((".csv", "csv"), (".tsv", "csv"), (".json", "json"), (".ndjson", "json"),
                        (".qrels", "qrels"), (".qrel", "qrels")):
        if lower.endswith(suffix):
            return fmt
    head = text.lstrip()[:1]
    if head in "[{":
        return "json"
    first = next((line for _, line in _lines(text)), "")
    return "qrels" if len(first.split()) == 4 and "," not in first else "csv"


def _csv_rows(text: str) -> Iterable[tuple[str, str, str]]:
    """Rows of ``query,docid,rating``; or, under a header that names the columns ``query``,
    ``docId`` (or ``docid``, ``doc_id``) and ``rating`` in any order, those columns and any others
    ignored (the file ``workbench experiment label-sample`` writes, with document fields for the
    people who rate). A row whose rating is left empty is an error naming it."""
    dialect = csv.excel_tab if "\t" in text.split("\n", 1)[0] else csv.excel
    reader = csv.reader(io.StringIO(text), dialect)
    columns: tuple[int, int, int] | None = None
    for n, row in enumerate(reader, 1):
        if not row or not any(cell.strip() for cell in row):
            continue
        cells = [cell.strip() for cell in row]
        if columns is None and n == 1:
            columns = _header_columns(cells)
            if columns is not None:
                continue
        if columns is None:
            if len(cells) != 3:
                raise FormatError(f"line {n}: expected query,docid,rating, got {len(row)} fields")
            query, doc_id, rating = cells
            if n == 1 and not _is_number(rating):
                continue  # a header such as query,docid,rating
        else:
            if len(cells) <= max(columns):
                raise FormatError(f"line {n}: expected {max(columns) + 1} fields or more, got "
                                  f"{len(row)}")
            query, doc_id, rating = (cells[i] for i in columns)
        if not rating:
            raise FormatError(f"line {n}: no rating for {query!r}, document {doc_id!r} (rate "
                              "every row, or delete the rows left unrated)")
        yield query, doc_id, _rating(rating, n)


def _header_columns(cells: list[str]) -> tuple[int, int, int] | None:
    """Positions of query, doc id and rating when ``cells`` is a header naming them all."""
    names = [cell.lower().replace("_", "") for cell in cells]
    try:
        return names.index("query"), names.index("docid"), names.index("rating")
    except ValueError:
        return None


def _qrels_rows(text: str, topics: Mapping[str, str] | None,
                qid_as_query: bool) -> Iterable[tuple[str, str, str]]:
    if topics is None and not qid_as_query:
        raise FormatError("TREC qrels name queries by id: give --topics (qid<TAB>query text, or "
                          "a JSON object qid -> text) or --qid-as-query")
    for n, line in _lines(text):
        fields = line.split()
        if len(fields) != 4:
            raise FormatError(f"line {n}: expected 'qid 0 docid rating', got {line[:80]!r}")
        qid, _, doc_id, rating = fields
        if topics is not None:
            if qid not in topics:
                raise FormatError(f"line {n}: query id {qid} is not in the topics file")
            query = topics[qid]
        else:
            query = qid
        yield query, doc_id, _rating(rating, n)


def _json_ratings(data: Any) -> Ratings:
    if isinstance(data, dict):
        data = data.get("judgmentRatings")
    if not isinstance(data, list):
        raise FormatError("JSON judgments are a judgmentRatings list, an object with "
                          "judgmentRatings, or a flat list of {query, docId, rating}")
    if all(isinstance(row, dict) and "ratings" in row for row in data):
        return [{"query": row["query"], "ratings": [
            {"docId": str(r["docId"]), "rating": _rating(str(r["rating"]), n)}
            for r in row["ratings"]]} for n, row in enumerate(data, 1)]
    rows = []
    for n, row in enumerate(data, 1):
        if not isinstance(row, dict) or not {"query", "docId", "rating"} <= set(row):
            raise FormatError(f"entry {n}: expected {{query, docId, rating}} or "
                              f"{{query, ratings: [...]}}, got {json.dumps(row)[:80]}")
        rows.append((str(row["query"]), str(row["docId"]), _rating(str(row["rating"]), n)))
    return _group(rows)


def _group(rows: Iterable[tuple[str, str, str]]) -> Ratings:
    """Rows grouped by query, in first-seen order; a later rating of the same pair wins."""
    grouped: dict[str, dict[str, str]] = {}
    for query, doc_id, rating in rows:
        grouped.setdefault(query, {})[doc_id] = rating
    return [{"query": q, "ratings": [{"docId": d, "rating": r} for d, r in docs.items()]}
            for q, docs in grouped.items()]


def _rating(value: str, n: int) -> str:
    if not _is_number(value):
        raise FormatError(f"line {n}: rating {value!r} is not a number")
    return value


def _is_number(value: str) -> bool:
    try:
        return math.isfinite(float(value))
    except ValueError:
        return False


# topics (qid <-> query text) -----------------------------------------------------------------

def parse_topics(text: str) -> dict[str, str]:
    """qid -> query text from ``qid<TAB>text`` lines (MS MARCO / ir_datasets style) or JSON."""
    if text.lstrip()[:1] == "{":
        data = _json(text)
        return {str(k): str(v) for k, v in data.items()}
    topics = {}
    for n, line in _lines(text):
        qid, sep, query = line.partition("\t")
        if not sep or not qid.strip() or not query.strip():
            raise FormatError(f"topics line {n}: expected 'qid<TAB>query text'")
        topics[qid.strip()] = query.strip()
    return topics


def qid_for(query: str) -> str:
    """A stable TREC query id for a query text (no whitespace), the same in every export."""
    return "q" + hashlib.sha1(query.encode()).hexdigest()[:10]


def topics_text(qids: Mapping[str, str]) -> str:
    """``qid<TAB>query text`` lines from a text -> qid mapping."""
    return "".join(f"{qid}\t{_one_line(text)}\n" for text, qid in qids.items())


# TREC run / qrels out ------------------------------------------------------------------------

def run_lines(evaluations: Iterable[Mapping[str, Any]], qids: Mapping[str, str], tag: str) -> str:
    """TREC run lines ``qid Q0 docid rank score tag`` from evaluation results.

    Evaluation results keep the ranking but not the engine's scores, so the score is
    ``1/rank``: strictly decreasing, which is all trec_eval, ranx and ir_measures use it for.
    """
    safe_tag = re.sub(r"\s+", "_", tag) or "workbench"
    out = []
    for evaluation in sorted(evaluations, key=lambda e: qids[e["searchText"]]):
        qid = qids[evaluation["searchText"]]
        for rank, doc_id in enumerate(evaluation.get("documentIds") or [], 1):
            out.append(f"{qid} Q0 {doc_id} {rank} {1 / rank:.6f} {safe_tag}\n")
    return "".join(out)


def qrels_lines(ratings: Ratings, qids: Mapping[str, str]) -> str:
    """TREC qrels lines ``qid 0 docid rating``; integral ratings are written as integers
    (``"100.000"`` -> ``100``), as trec_eval and pytrec_eval read only integer grades."""
    out = []
    for row in ratings:
        qid = qids[row["query"]]
        for rating in row["ratings"]:
            value = float(rating["rating"])
            grade = str(int(value)) if value.is_integer() else repr(value)
            out.append(f"{qid} 0 {rating['docId']} {grade}\n")
    return "".join(out)


def merged_ratings(lists: Iterable[Ratings]) -> Ratings:
    """Several judgment lists as the experiment reads them: per query, a later list's rating of
    the same document wins."""
    rows = ((row["query"], r["docId"], str(r["rating"])) for ratings in lists
            for row in ratings for r in row["ratings"])
    return _group(rows)


# helpers ------------------------------------------------------------------------------------

def _lines(text: str) -> Iterable[tuple[int, str]]:
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip() and not line.lstrip().startswith("#"):
            yield n, line.strip()


def _json(text: str, n: int | None = None) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        where = f"line {n}: " if n else ""
        raise FormatError(f"{where}not valid JSON ({exc})") from None


def _one_line(text: str) -> str:
    return re.sub(r"[\t\r\n]+", " ", text)
