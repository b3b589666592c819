"""Where the benchmarks and the tools under scripts/ write by default: under ``$WORKBENCH_HOME``
(as scripts/lib.sh picks it: ``/var/lib/workbench`` as root, else ``~/.cache/workbench``), never
into the checkout or the installed package. The figures the documentation quotes live in
scripts/bench/results/ of the checkout; a run writes there only when told to
(``--out scripts/bench/results/...``)."""

from __future__ import annotations

import os
from pathlib import Path


def workbench_home() -> Path:
    """``$WORKBENCH_HOME``, or the default scripts/lib.sh uses."""
    home = os.environ.get("WORKBENCH_HOME")
    if home:
        return Path(home)
    if os.geteuid() == 0:
        return Path("/var/lib/workbench")
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "workbench"


def output(*parts: str) -> Path:
    """A default output path under ``$WORKBENCH_HOME/output``."""
    return workbench_home().joinpath("output", *parts)
