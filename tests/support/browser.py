"""Headless Chromium for the tests (scripts/browser.py opens the page): its absence fails the
test, and ``colours`` tells a drawn page from a blank one."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from scripts.browser import Rendered, missing
from scripts.browser import render as open_page

__all__ = ["Rendered", "colours", "render", "require_chromium"]

def require_chromium() -> None:
    """A failure, not a skip: scripts/test.sh installs them, so their absence is a broken
    setup that would otherwise let the report test pass without opening anything."""
    problem = missing()
    if problem:
        pytest.fail(problem)


def render(path: Path, width: int = 1200, height: int = 1800) -> Rendered:
    """Open a local HTML file in headless Chromium, wait for its images, screenshot it."""
    require_chromium()
    return open_page(path, width, height)


def colours(png: bytes) -> int:
    """How many distinct colours a PNG holds (a blank page has one)."""
    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        found = image.convert("RGB").getcolors(maxcolors=1 << 24)
    return len(found or [])
