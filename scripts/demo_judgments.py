"""Make the demo judgments that ship in ``workbench/demo/data`` from the ESCI sample.

The search-relevance plugin's ESCI sample grades Exact 100, Substitute 10, Complement 1 and
Irrelevant 0, so that DCG (gain ``2^rating - 1``) is ~1e30 and prints digit by digit. The
workbench's demo uses the usual graded mapping instead, Exact 3, Substitute 2, Complement 1,
Irrelevant 0: the same order (so NDCG's ideal ranking is the same), readable gains. Nothing
else of the file changes; ``tests/integration/test_indices_and_cli.py`` checks the shipped
file is exactly this script's output for the sample.

    .venv/bin/python -m scripts.demo_judgments ../shared/data/esci/esci_us_judgments.json

writes ``workbench/demo/data/esci_us_judgments.json.gz`` (gzip without a timestamp, so the
same input gives the same bytes).
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path
from typing import Any

from workbench.demo.load import JUDGMENTS

ESCI_GRADES = {"100.000": "3", "10.000": "2", "1.000": "1", "0.000": "0"}
DESCRIPTION = ("ESCI human judgments, graded Exact 3, Substitute 2, Complement 1, "
               "Irrelevant 0")


def regraded(sample: dict[str, Any]) -> dict[str, Any]:
    """The plugin-shaped ESCI sample with each rating mapped to the 3/2/1/0 scale (a rating
    outside the sample's four grades is an error: the input is not that sample)."""
    rows = [{"query": row["query"],
             "ratings": [{"docId": r["docId"], "rating": ESCI_GRADES[r["rating"]]}
                         for r in row["ratings"]]}
            for row in sample["judgmentRatings"]]
    return dict(sample, description=DESCRIPTION, judgmentRatings=rows)


def shipped_bytes(sample: dict[str, Any]) -> bytes:
    """The gzipped file as it ships (formatted as the sample is, no gzip timestamp)."""
    text = json.dumps(regraded(sample), indent=2, ensure_ascii=False) + "\n"
    return gzip.compress(text.encode(), mtime=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sample", type=Path, help="the plugin's esci_us_judgments.json")
    parser.add_argument("--out", type=Path, default=JUDGMENTS)
    args = parser.parse_args()
    args.out.write_bytes(shipped_bytes(json.loads(args.sample.read_text())))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
