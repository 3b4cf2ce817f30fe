"""The manual's two screenshots of `tecb-eval report` (docs/report-leaderboard.png and
docs/report-model.png), made from a real results store, and their sizes (printed, not a test).

    python bench/bench_docs_screens.py --out docs/ [--store demo-out/eval/results.jsonl]

Without --store it first runs `make demo`'s commands into a temporary folder (about 5 minutes on a
2-core machine) and uses that store. The report is rendered into a temporary folder and opened
from file:// in headless Chromium (Debian's `chromium`, driven by playwright from the `test` extra)
at 1280 x 900 CSS pixels: the leaderboard's top (the average and the first boards) and the model
page of the first model. Each PNG is kept under 300 KB (the manual's limit, checked by
tests/test_docs.py): a larger shot is retaken at a smaller height.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
REFERENCE = REPO.parent / "shared" / "reference" / "tecb-de-full-results.csv"
LIMIT = 300 * 1024
WIDTH = 1280


def demo_store(work: Path) -> Path:
    data = work / "demo-out"
    for source in ("blurbs", "tenkgnad"):
        subprocess.run([BIN / "tecb-data", "build", "--source", source, "--demo", "--out", data], check=True)
    subprocess.run([BIN / "tecb-eval", "demo", "--data", data, "--out", data / "eval", "--cache-dir",
                    data / ".tecb-cache", "--quiet"], check=True, env={**__import__("os").environ, "HF_HUB_OFFLINE": "1"})
    return data / "eval" / "results.jsonl"


def shoot(page, url: str, target: Path, height: int) -> int:
    page.set_viewport_size({"width": WIDTH, "height": height})
    page.goto(url)
    page.screenshot(path=str(target), full_page=False)
    return target.stat().st_size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the two PNGs (docs/ for the manual)")
    parser.add_argument("--store", type=Path, help="results store to render (default: a fresh demo run)")
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("no headless browser: install Debian's chromium (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        store = args.store or demo_store(work)
        site = work / "report"
        command = [BIN / "tecb-eval", "report", store, "--out", site]
        if REFERENCE.exists():
            command += ["--reference", REFERENCE]
        subprocess.run(command, check=True)
        model = sorted((site / "models").glob("*.html"))[0]
        args.out.mkdir(parents=True, exist_ok=True)
        with sync_playwright() as playwright:
            # As root (CI containers) Chromium's sandbox cannot start; the pages are our own files.
            browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
            page = browser.new_page()
            for name, html in (("report-leaderboard.png", site / "index.html"), ("report-model.png", model)):
                height = 1100
                while shoot(page, html.as_uri(), args.out / name, height) > LIMIT and height > 400:
                    height -= 100
                size = (args.out / name).stat().st_size
                print(f"{args.out / name}: {WIDTH} x {height} px, {size / 1024:.0f} KB ({html.relative_to(site)})")
            browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
