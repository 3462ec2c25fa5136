"""The score of a mutmut run and every mutant it left alive, each with a reason.

Run in the folder where ``mutmut run`` ran (it reads ``mutmut results --all true`` and
``mutmut show``)::

    python /path/to/tools/mutation_report.py > docs/mutation-survivors.md
    python /path/to/tools/mutation_report.py --exclude audit    # all but the audit
    python /path/to/tools/mutation_report.py --names sample.txt # a sample's mutants

Reasons come from :data:`REASONS` in docs/mutation_reasons.py: per pattern over the
mutant's name and its changed lines. A survivor no reason covers is listed as
``UNREVIEWED``; the report's last line counts them. A mutant whose tests time out is
detected (it made them hang), as mutation tools count it.

The score over non-equivalent mutants leaves out the survivors whose reason starts with
"equivalent" or "unreachable" (no input tells them from the code).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "docs"))
from mutation_reasons import REASONS  # noqa: E402

DETECTED = ("killed", "timeout")
NOT_DETECTED = ("survived", "no tests", "suspicious")


def _mutmut(*args: str) -> str:
    return subprocess.run(["mutmut", *args], capture_output=True, text=True,
                          check=False).stdout


def statuses() -> list[tuple[str, str]]:
    """(mutant name, status) for every mutant of the run."""
    out = []
    for line in _mutmut("results", "--all", "true").splitlines():
        name, _, status = line.strip().rpartition(": ")
        if name:
            out.append((name, status))
    return out


def module_of(name: str) -> str:
    """``gradgen.stability.guards.taylor`` for
    ``gradgen.stability.guards.taylor.x__series__mutmut_3``."""
    return re.sub(r"\.x[_ǁ].*$", "", name)


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


def _equivalent(reason: str) -> bool:
    return reason.startswith(("equivalent", "unreachable"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exclude", help="leave out mutants whose name matches this regex")
    parser.add_argument("--names", type=Path,
                        help="only the mutants named in this file, one per line (a sample)")
    args = parser.parse_args(argv)
    all_statuses = statuses()
    if args.exclude:
        all_statuses = [(n, s) for n, s in all_statuses if not re.search(args.exclude, n)]
    if args.names:
        wanted = set(args.names.read_text().split())
        all_statuses = [(n, s) for n, s in all_statuses if n in wanted]
    rows = []
    for name, status in all_statuses:
        if status in NOT_DETECTED:
            diff = changed_lines(name)
            rows.append((reason_for(name, status, diff), name, status, diff))
    totals: Counter = Counter()
    per_module: dict[str, Counter] = {}
    for name, status in all_statuses:
        c = per_module.setdefault(module_of(name), Counter())
        c[status] += 1
        totals[status] += 1
    equivalent: Counter = Counter(module_of(n) for r, n, _, _ in rows if _equivalent(r))

    def line(label: str, c: Counter, eq: int) -> str:
        total = sum(c.values())
        detected = sum(c[s] for s in DETECTED)
        alive = total - detected
        score = 100 * detected / total if total else 100.0
        real = total - eq
        score_real = 100 * detected / real if real else 100.0
        return (f"| {label} | {total:,} | {c['killed']:,} | {c['timeout']:,} | {alive:,} "
                f"| {eq:,} | {score:.1f}% | {score_real:.1f}% |")

    print("| module | mutants | killed | timeout | not detected | of which equivalent "
          "or unreachable | score | score over non-equivalent |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for module in sorted(per_module):
        print(line(f"`{module}`", per_module[module], equivalent[module]))
    print(line("all", totals, sum(equivalent.values())))
    print()
    rows.sort()
    print("| mutant | status | change | why it survives |")
    print("| --- | --- | --- | --- |")
    for reason, name, status, diff in rows:
        shown = diff.replace("|", "\\|")
        if len(shown) > 160:
            shown = shown[:157] + "..."
        print(f"| `{name.replace('ǁ', '.')}` | {status} | `{shown}` | {reason} |")
    unreviewed = sum(1 for r in rows if r[0] == "UNREVIEWED")
    print(f"\n{len(rows)} mutants not detected; {unreviewed} without a reason.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
