"""Headless Chromium (Debian's ``chromium`` and ``chromium-driver``, installed by
``scripts/install.sh --dev``) through selenium: open a page, report its images' natural sizes
and take a screenshot. Used by the report tests and by ``scripts/doc_pictures.py``."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


@dataclass
class Rendered:
    title: str
    images: list[dict[str, int | bool | str]]  # naturalWidth, naturalHeight, complete, alt
    screenshot: bytes  # PNG of the viewport


def missing() -> str | None:
    """Why Chromium cannot run here, or None."""
    if Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists():
        return None
    return ("Debian's chromium and chromium-driver are not installed "
            "(scripts/install.sh --dev installs them)")


def render(path: Path, width: int = 1200, height: int = 1800) -> Rendered:
    """Open a local HTML file in headless Chromium, wait for its images, screenshot it."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait

    problem = missing()
    if problem:
        raise RuntimeError(problem)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--hide-scrollbars",
                     f"--window-size={width},{height}"):
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
