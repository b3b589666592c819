"""The pictures of the documentation, made from the run of the page that shows them.

docs/guide.md's session runs the ESCI pointwise and hybrid experiments on the demo data, then
this script with their ids (``WORKBENCH_URL`` names the workbench, as for the command line):

    .venv/bin/python -m scripts.doc_pictures --report "$EXPERIMENT" report-esci-pointwise.png \\
        --heat-map "$GRID" report-esci-hybrid-heatmap.png

* ``--report ID FILE``: the experiment's HTML report (``_report?format=html``) as headless
  Chromium shows it, the top of the page (its tables and the first plot);
* ``--heat-map ID FILE``: the hybrid grid plot of the experiment's report, as the report
  embeds it.

Each PNG carries in a text chunk (``FACTS``) the figures it shows, as text: the report's
Markdown (``_report?format=md``) with its ids replaced, and for the heat map every variant's
mean. tests/integration/test_doc_examples.py runs the page, and with it this script, and
requires every picture the page shows to carry the facts of that run, so a picture cannot show
other figures than the page's own run; with ``WORKBENCH_DOCS_PICTURES=write`` it writes the
run's pictures into docs/ instead (how they are refreshed after a change).
"""

from __future__ import annotations

import argparse
import base64
import io
import re
import tempfile
from pathlib import Path

from PIL import Image
from PIL.PngImagePlugin import PngInfo

from scripts.browser import render
from workbench.cli.client import WorkbenchClient

FACTS = "workbench-facts"
WIDTH, HEIGHT = 1100, 1360  # the screenshot: the report's tables and its first plot
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_HEAT_MAP = re.compile(r'<img class="plot" alt="Hybrid grid[^"]*" src="data:image/png;base64,'
                       r'([A-Za-z0-9+/=]+)"')


def facts_of(client: WorkbenchClient, experiment_id: str) -> str:
    """The figures of an experiment's report, as its Markdown, ids replaced by ``<id>``."""
    text = client.srw("GET", f"/experiments/{experiment_id}/_report", params={"format": "md"})
    return _UUID.sub("<id>", str(text))


def grid_facts(client: WorkbenchClient, experiment_id: str) -> str:
    """Every hybrid variant's mean of the summary's metric (the cells of the heat map), one
    line each, after the report's Markdown (which lists only the ten best)."""
    summary = client.srw("GET", f"/experiments/{experiment_id}/_summary")
    metric = summary["metric"]
    cells = sorted(
        f"{', '.join(f'{k}={v}' for k, v in sorted((row.get('parameters') or {}).items()))}: "
        f"{row['metrics'][metric]['mean']:.4f}" for row in summary["configurations"])
    return facts_of(client, experiment_id) + f"\n## Mean {metric} of every variant\n\n" + \
        "\n".join(cells) + "\n"


def read_facts(picture: Path) -> str | None:
    """The facts a picture carries (None: it was not made by this script)."""
    with Image.open(picture) as image:
        value = getattr(image, "text", {}).get(FACTS)
    return None if value is None else str(value)


def _save(png: bytes, facts: str, out: Path) -> None:
    info = PngInfo()
    info.add_text(FACTS, facts, zip=True)
    with Image.open(io.BytesIO(png)) as image:
        image.save(out, format="PNG", pnginfo=info, optimize=True)


def report_picture(client: WorkbenchClient, experiment_id: str, out: Path) -> None:
    """The top of the experiment's HTML report, as Chromium draws it."""
    html = client.srw("GET", f"/experiments/{experiment_id}/_report", params={"format": "html"})
    with tempfile.TemporaryDirectory() as folder:
        page = Path(folder) / "report.html"
        page.write_text(str(html))
        rendered = render(page, WIDTH, HEIGHT)
    _save(rendered.screenshot, facts_of(client, experiment_id), out)


def heat_map_picture(client: WorkbenchClient, experiment_id: str, out: Path) -> None:
    """The hybrid grid heat map of a HYBRID_OPTIMIZER experiment's report."""
    html = client.srw("GET", f"/experiments/{experiment_id}/_report", params={"format": "html"})
    found = _HEAT_MAP.search(str(html))
    if found is None:
        raise SystemExit(f"the report of {experiment_id} has no hybrid grid heat map "
                         "(is it a HYBRID_OPTIMIZER experiment?)")
    _save(base64.b64decode(found.group(1)), grid_facts(client, experiment_id), out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report", nargs=2, action="append", default=[],
                        metavar=("EXPERIMENT", "FILE"))
    parser.add_argument("--heat-map", nargs=2, action="append", default=[],
                        metavar=("EXPERIMENT", "FILE"))
    args = parser.parse_args()
    client = WorkbenchClient()
    for experiment_id, out in args.report:
        report_picture(client, experiment_id, Path(out))
        print(f"{out}: the report of experiment {experiment_id}")
    for experiment_id, out in args.heat_map:
        heat_map_picture(client, experiment_id, Path(out))
        print(f"{out}: the hybrid grid of experiment {experiment_id}")


if __name__ == "__main__":
    main()
