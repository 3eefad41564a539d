"""The summary email's HTML part as a person sees it: rendered by a real browser (headless
Chromium) into a PNG, to look at after changing the templates.

Makes the HTML of a large batch with summary_email.py (same options), then has Chromium
take a screenshot of it. Chromium is not needed by the test suite; on Debian:
``apt-get install -y chromium``.

    .venv/bin/python benchmarks/summary_screenshot.py [--out docs/summary-email.png]
        [--width 1000] [--height 2400] [--items 10000] [--failed 500]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE.parent / "docs" / "summary-email.png")
    parser.add_argument("--width", type=int, default=1000)
    parser.add_argument("--height", type=int, default=2400)
    parser.add_argument("--browser", default=shutil.which("chromium") or "chromium")
    args, batch = parser.parse_known_args()
    with tempfile.TemporaryDirectory() as folder:
        html = Path(folder) / "summary.html"
        subprocess.run([sys.executable, str(HERE / "summary_email.py"), "--html", str(html),
                        *batch], check=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        # A throwaway profile, and nothing of the browser's own that reaches the network.
        command = [args.browser, "--headless", "--disable-gpu", "--disable-quic",
                   "--no-first-run", "--disable-background-networking",
                   "--disable-component-update", "--disable-sync", "--hide-scrollbars",
                   f"--user-data-dir={Path(folder) / 'profile'}",
                   f"--window-size={args.width},{args.height}",
                   f"--screenshot={args.out.resolve()}", html.as_uri()]
        if os.geteuid() == 0:
            command.insert(1, "--no-sandbox")  # Chromium refuses to run as root otherwise
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode != 0 or not args.out.is_file():
            print(done.stderr, file=sys.stderr)
            return 1
    print(f"screenshot: {args.out} ({args.out.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
