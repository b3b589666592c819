"""Figures for the self-contained HTML reports (experiments, A/B tests, monitors): matplotlib
on the Agg backend (no display needed), each figure returned as a base64 PNG to embed in the
page as a ``data:`` URI, so a report is one file that can be mailed or attached to a CI run."""

from __future__ import annotations

import base64
import io

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # after use("Agg"): no display
from matplotlib.figure import Figure

DPI = 90


def png(fig: Figure) -> str:
    """The figure as a base64 PNG (closed afterwards: a worker draws many)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")
