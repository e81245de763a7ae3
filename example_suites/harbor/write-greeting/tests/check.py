"""Compare one file with the expected text; write a CTRF report and the reward."""

import json
import sys
import time
from pathlib import Path

path, expected = Path(sys.argv[1]), sys.argv[2]
start = int(time.time() * 1000)
try:
    got = path.read_text().rstrip("\n")
except OSError as exc:
    got, message = None, f"{path} cannot be read: {exc.strerror}"
else:
    message = f"expected {expected!r}, got {got!r}"
passed = got == expected
test = {"name": f"test_{path.stem}_content", "status": "passed" if passed else "failed",
        "duration": 0}
if not passed:
    test["message"] = message
stop = int(time.time() * 1000)
report = {
    "reportFormat": "CTRF",
    "specVersion": "0.0.0",
    "results": {
        "tool": {"name": "check.py"},
        "summary": {"tests": 1, "passed": int(passed), "failed": int(not passed), "skipped": 0,
                    "pending": 0, "other": 0, "start": start, "stop": stop},
        "tests": [test],
    },
}
Path("/logs/verifier/ctrf.json").write_text(json.dumps(report))
Path("/logs/verifier/reward.txt").write_text("1\n" if passed else "0\n")
print("passed" if passed else f"FAILED {test['name']}: {message}")
