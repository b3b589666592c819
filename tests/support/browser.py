"""Headless Chromium (Debian's ``chromium`` and ``chromium-driver``) through selenium: open a
page, report its images' natural sizes and take a screenshot."""

from __future__ import annotations

import io
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


@dataclass
class Rendered:
    title: str
    images: list[dict[str, int | bool | str]]  # naturalWidth, naturalHeight, complete, alt
    screenshot: bytes  # PNG of the viewport


def require_chromium() -> None:
    """A failure, not a skip: scripts/test.sh installs them, so their absence is a broken
    setup that would otherwise let the report test pass without opening anything."""
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.fail("Debian's chromium and chromium-driver are not installed "
                    "(scripts/install.sh --dev installs them)")


def render(path: Path, width: int = 1200, height: int = 1800) -> Rendered:
    """Open a local HTML file in headless Chromium, wait for its images, screenshot it."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait

    require_chromium()
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", f"--window-size={width},{height}"):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    try:
        driver.get(path.resolve().as_uri())
        WebDriverWait(driver, 30).until(lambda d: d.execute_script(
            "return Array.from(document.images).every(i => i.complete)"))
        images = driver.execute_script(
            "return Array.from(document.images).map(i => ({naturalWidth: i.naturalWidth, "
            "naturalHeight: i.naturalHeight, complete: i.complete, alt: i.alt}))")
        return Rendered(driver.title, images, driver.get_screenshot_as_png())
    finally:
        driver.quit()


def colours(png: bytes) -> int:
    """How many distinct colours a PNG holds (a blank page has one)."""
    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        found = image.convert("RGB").getcolors(maxcolors=1 << 24)
    return len(found or [])
