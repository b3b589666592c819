"""How the example runner (tests/integration/test_doc_examples.py) reads a page's fences."""

from __future__ import annotations

from pathlib import Path

from tests.support import doc_examples
from tests.support.doc_examples import fences, normalise


def test_console_sessions_markers_and_indented_fences(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(doc_examples, "REPO", tmp_path)
    page = tmp_path / "page.md"
    page.write_text(
        "Intro\n\n<!-- example: setup -->\n```bash\n./scripts/up.sh\n```\n\n"
        "```console\n$ QS=$(workbench query-set create q.txt \\\n    --name x)\n"
        "query set 'x': 2 queries\n  importing ━━━━ 1/1 0:00:03\n$ echo done\ndone\n```\n\n"
        "1. Step:\n\n   ```bash\n   echo indented\n   ```\n")
    setup, console, indented = fences(page)
    assert (setup.marker, setup.language, setup.text) == ("setup", "bash", "./scripts/up.sh")
    assert console.where == "page.md:8" and console.marker is None
    first, second = console.steps()
    assert first.command == "QS=$(workbench query-set create q.txt \\\n    --name x)"
    assert normalise(first.output) == ["query set 'x': 2 queries"]
    assert (second.command, second.output) == ("echo done", ["done"])
    assert indented.text == "echo indented"


def test_normalise_replaces_ids_and_durations() -> None:
    assert normalise(["experiment 005d39bd-bc58-449b-aee3-487f708b140b  ", "took 0:01:02", ""]
                     ) == ["experiment <id>", "took <duration>"]


def test_json_patterns_allow_what_the_page_leaves_out_and_nothing_else() -> None:
    from tests.support.doc_examples import json_mismatches, parse_pattern, shown_as_json

    pattern = parse_pattern('{"metrics": {"ndcg": 0.9197, ...}, "hits": [{"id": "B1", ...}, ...],'
                            ' "id": "5f0c...", "took": ..., "dcg": 3.16e+30}')
    actual = {"metrics": {"ndcg": 0.9197207891481877, "map": 1.0},
              "hits": [{"id": "B1", "rank": 1}, {"id": "B2"}], "id": "5f0c2a9e", "took": 7,
              "dcg": 3.159e30}
    assert json_mismatches(pattern, actual) == []
    wrong = dict(actual, metrics={"ndcg": 0.9198}, hits=[], id="6f1c", extra=1, dcg=3.2e30)
    assert sorted(json_mismatches(pattern, wrong)) == sorted([
        "$.extra: not shown on the page", "$.metrics.ndcg: 0.9198, the page shows 0.9197",
        "$.hits: 0 items, the page shows 1 or more", "$.id: '6f1c', the page shows '5f0c...'",
        "$.dcg: 3.2e+30, the page shows 3.16e+30"])
    # without ``...`` a list and an object must be exactly as shown; an integer is not a float
    assert json_mismatches(parse_pattern('[1, 2]'), [1, 2, 3]) == [
        "$: 3 items, the page shows 2"]
    assert json_mismatches(parse_pattern('{"a": 1}'), {"a": 1.0}) == [
        "$.a: 1.0, the page shows 1"]
    assert shown_as_json(['{"a": [1, ...]}']) and not shown_as_json(["[workbench] up to date"])


def test_a_command_continues_while_a_quotation_is_open(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```console\n$ curl -d '{\n  \"a\": 1}' \\\n    -s x\n{\"ok\": true}\n"
                    "$ echo done\ndone\n```\n")
    steps = fences(page)[0].steps()
    assert [s.command for s in steps] == ["curl -d '{\n  \"a\": 1}' \\\n    -s x", "echo done"]
    assert [s.output for s in steps] == [['{"ok": true}'], ["done"]]


def test_normalise_replaces_times_of_day() -> None:
    assert normalise(["│ 2026-11-29 09:07:12 │ OK │", "at 2026-11-29T09:07:12.123Z, 2026-11-29"]
                     ) == ["│ <time> │ OK │", "at <time>, 2026-11-29"]
