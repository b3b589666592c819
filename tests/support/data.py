"""Where the shared real data lives (ESCI and Dashboards' UBI sample), never copied into the repo.

``WORKBENCH_DATA_DIR`` wins; otherwise ``../shared/data`` next to the checkout, then
``/work/shared/data``.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def data_dir() -> Path:
    candidates = [os.environ.get("WORKBENCH_DATA_DIR"), REPO.parent / "shared" / "data",
                  "/work/shared/data"]
    for candidate in candidates:
        if candidate and (Path(candidate) / "esci").is_dir():
            return Path(candidate)
    raise RuntimeError(
        "the shared data folder (esci/, ubi-sample/) was not found; set WORKBENCH_DATA_DIR"
    )


DATA = data_dir()
ESCI = DATA / "esci"
UBI_SAMPLE = DATA / "ubi-sample"
