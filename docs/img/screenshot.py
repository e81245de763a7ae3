"""Make docs/img/html-report.png and docs/img/html-report-task.png: the HTML report of
a real ``pytest --agentbench example_suites`` run (the scripted model), in headless
Chromium.

Run: .venv/bin/python docs/img/screenshot.py   (needs Playwright and a Chromium:
``AGENTBENCH_CHROMIUM`` or ``chromium`` on PATH)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def main() -> None:
    chromium = os.environ.get("AGENTBENCH_CHROMIUM") or shutil.which("chromium")
    if chromium is None:
        sys.exit("no chromium: install it or set AGENTBENCH_CHROMIUM")
    with tempfile.TemporaryDirectory() as folder:
        env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
        subprocess.run(
            [sys.executable, "-m", "pytest", "--agentbench", str(ROOT / "example_suites"),
             "-q", "-p", "no:cacheprovider", "--agentbench-out", "results"],
            cwd=folder, env=env, capture_output=True, check=False,
        )  # fmt: skip
        page_path = (Path(folder) / "results" / "latest" / "report.html").resolve()
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium)
            page = browser.new_page(viewport={"width": 1280, "height": 1500})
            page.goto(page_path.as_uri())
            page.screenshot(path=str(HERE / "html-report.png"))
            page.click("#task-table tbody tr:has-text('stuck-double-check') td:nth-child(4)")
            panel = page.locator("#panel")
            panel.wait_for(state="visible")
            panel.screenshot(path=str(HERE / "html-report-task.png"))
            browser.close()
    print(f"wrote {HERE / 'html-report.png'} and {HERE / 'html-report-task.png'}")


if __name__ == "__main__":
    main()
