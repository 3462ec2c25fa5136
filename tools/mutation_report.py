"""List the mutants a mutmut run left alive, each with the reason it survives.

Run in the folder where ``mutmut run`` ran (it reads ``mutmut results`` and
``mutmut show``)::

    python /path/to/tools/mutation_report.py > survivors.md

Reasons come from :data:`REASONS` in docs/mutation_reasons.py: per mutant name, or per
pattern over the mutant's name and its changed lines. A survivor no reason covers is
listed as ``UNREVIEWED``; the report's last line counts them.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "docs"))
from mutation_reasons import REASONS  # noqa: E402


def _mutmut(*args: str) -> str:
    return subprocess.run(["mutmut", *args], capture_output=True, text=True,
                          check=False).stdout


def survivors() -> list[tuple[str, str]]:
    """(mutant name, status) for every mutant not killed (survived, no tests, timeout)."""
    out = []
    for line in _mutmut("results").splitlines():
        name, _, status = line.strip().rpartition(": ")
        if name and status in ("survived", "no tests", "timeout", "suspicious"):
            out.append((name, status))
    return out


def changed_lines(name: str) -> str:
    """The mutant's diff, only its changed lines, joined with ' / '."""
    diff = _mutmut("show", name)
    lines = [line for line in diff.splitlines()
             if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    return " / ".join(re.sub(r"\s+", " ", line).strip() for line in lines)


def reason_for(name: str, status: str, diff: str) -> str:
    for pattern, diff_pattern, reason in REASONS:
        if re.search(pattern, name) and re.search(diff_pattern, diff):
            return reason
    return "no test calls it" if status == "no tests" else "UNREVIEWED"


def main() -> int:
    rows = []
    for name, status in survivors():
        diff = changed_lines(name)
        rows.append((reason_for(name, status, diff), name, status, diff))
    rows.sort()
    print("| mutant | status | change | why it survives |")
    print("| --- | --- | --- | --- |")
    for reason, name, status, diff in rows:
        shown = diff.replace("|", "\\|")
        if len(shown) > 160:
            shown = shown[:157] + "..."
        print(f"| `{name.replace('ǁ', '.')}` | {status} | `{shown}` | {reason} |")
    unreviewed = sum(1 for r in rows if r[0] == "UNREVIEWED")
    print(f"\n{len(rows)} mutants not killed; {unreviewed} without a reason.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
