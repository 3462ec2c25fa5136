"""The ``gradgen`` command line.

Consumes: command-line arguments, and ``[tool.gradgen]`` in the nearest
``pyproject.toml`` when no spec is named. Guarantees, for every command:

* exit status 0 when all is well, 1 when ``check`` finds stale, missing or orphaned
  output (or temporary files a killed build left), 2 for a bad spec or bad usage
  (every problem printed as ``file:line:col: error: ...`` on stderr, nothing written;
  also a hostile file, setting or path, and a time budget that ran out), 3 when a
  derived gradient fails the numerical verification or, with ``--strict-accuracy``,
  the accuracy audit (nothing written), 4 when the system refuses to write the output
  (permissions, a full disk, a file-size limit: no output file changed), 123 for an
  internal error;
* never a Python traceback for a user error;
* TensorFlow is never imported.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
import traceback
from pathlib import Path

import click

from .version import __version__
from .errors import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_STALE,
    GradgenError,
    OutputError,
    SpecError,
    UsageError,
)
from .files import describe
from .safe import check_path_text, printable

MAX_DIFF_LINES = 200
MAX_ERRORS = 50


# ------------------------------------------------------------------ reporting


class Reporter:
    """Where the command's messages go, in the chosen verbosity and error format."""

    def __init__(self, verbosity: int = 0, error_format: str = "text"):
        self.verbosity = verbosity
        self.error_format = error_format
        self.strict_accuracy = False
        self._started = time.monotonic()
        self._progress_shown = False

    def info(self, message: str) -> None:
        """A summary line (hidden by -q)."""
        if self.verbosity >= 0:
            click.echo(printable(message))

    def detail(self, message: str) -> None:
        """A per-file line (shown by -v)."""
        if self.verbosity > 0:
            click.echo(printable(message))

    def error(self, message: str, location=None, title: str = "gradgen") -> None:
        if self.error_format == "github":
            props = []
            if location is not None:
                props = [f"file={location.path}", f"line={location.line}",
                         f"col={location.col}"]
            props.append(f"title={title}")
            click.echo(printable(f"::error {','.join(props)}::{_escape(message)}"), err=True)
        else:
            prefix = f"{location}: error: " if location is not None else "gradgen: error: "
            click.echo(printable(prefix + message), err=True)

    def progress(self, label: str) -> None:
        """Called per op; shows a progress line on a terminal once a second has passed."""
        if self.verbosity < 0 or not sys.stderr.isatty():
            return
        if time.monotonic() - self._started < 1.0:
            return
        self._progress_shown = True
        click.echo(f"\r\x1b[Kderiving {label}", err=True, nl=False)

    def end_progress(self) -> None:
        if self._progress_shown:
            click.echo("\r\x1b[K", err=True, nl=False)
            self._progress_shown = False


def _escape(message: str) -> str:
    """GitHub workflow-command escaping of a message."""
    return message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _fail(error: GradgenError, reporter: Reporter) -> None:
    reporter.end_progress()
    if isinstance(error, SpecError):
        for d in error.diagnostics[:MAX_ERRORS]:
            if reporter.error_format == "github":
                body = d.format().split(": error: ", 1)[1]
                reporter.error(body, d.location)
            else:
                click.echo(printable(d.format()), err=True)
        n = len(error.diagnostics)
        if reporter.error_format != "github":
            more = f" ({n - MAX_ERRORS} not shown)" if n > MAX_ERRORS else ""
            click.echo(
                f"gradgen: {n} error{'s' if n != 1 else ''}{more}; nothing written", err=True
            )
    else:
        reporter.error(str(error), getattr(error, "location", None))
    sys.exit(error.exit_code)


def _run(action, reporter: Reporter):
    try:
        result = action()
        reporter.end_progress()
        return result
    except GradgenError as e:
        _fail(e, reporter)
    except KeyboardInterrupt:  # Ctrl-C: its own status, not click's "Aborted!" and 1,
        reporter.end_progress()  # which is check's "stale"
        click.echo("gradgen: interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except SystemExit:
        raise
    except Exception:  # a gradgen bug: say so, with the traceback for the report
        reporter.end_progress()
        click.echo("gradgen: internal error (please report it with this output):", err=True)
        click.echo(traceback.format_exc(), err=True)
        sys.exit(EXIT_INTERNAL)


# ------------------------------------------------------------------ options


def _disable_cache(ctx, param, value):
    if value:
        os.environ["GRADGEN_CACHE"] = "0"  # read by gradgen.cache.enabled()


def _common(f):
    f = click.option("-v", "--verbose", "verbosity", flag_value=1, help="One line per file.")(f)
    f = click.option("-q", "--quiet", "verbosity", flag_value=-1, help="No output on success.")(f)
    f = click.option(
        "--error-format", type=click.Choice(["text", "github"]), default=None,
        help="text (default), or github for GitHub Actions annotations.",
    )(f)
    f = click.option("--no-cache", is_flag=True, expose_value=False, is_eager=True,
                     callback=_disable_cache,
                     help="Derive every op afresh (do not read or write the cache).")(f)
    f = click.option("--no-verify", is_flag=True, default=None,
                     help="Skip the numerical check of derived gradients.")(f)
    f = click.option("--strict-accuracy", is_flag=True, default=None,
                     help="Fail (exit 3) when the accuracy audit finds a gradient that is "
                          "NaN or inf where the exact one is finite.")(f)
    f = click.option("-o", "--out", "out_dir", default=None,
                     help="Output folder (default: [tool.gradgen] out, else generated).")(f)
    f = click.argument("specs", nargs=-1, type=click.Path(dir_okay=False))(f)
    return f


def _settings(specs, out_dir, no_verify, verbosity, error_format, strict_accuracy=None):
    """Resolve command-line options against ``[tool.gradgen]``."""
    from .config import load_config

    reporter = Reporter(verbosity or 0, error_format or "text")
    config = _run(lambda: load_config(Path.cwd()), reporter)
    if error_format is None and config.error_format:
        reporter.error_format = config.error_format
    if not specs:  # a bare command: the project's specs, output and test folders
        specs = _run(config.spec_paths, reporter)
    else:  # named specs: only the command line (and defaults) decide where output goes
        config = dataclasses.replace(config, out=None, emit_tests=None, specs=())
    out = out_dir or config.out or "generated"
    _run(lambda: _check_paths(specs, out), reporter)
    verify = not no_verify if no_verify is not None else config.verify
    if strict_accuracy is None:
        strict_accuracy = config.strict_accuracy
    reporter.strict_accuracy = bool(strict_accuracy)
    return list(specs), out, verify, config, reporter


def _check_paths(specs, folder) -> None:
    """Refuse spec paths and an output or tests folder that hold control, format or
    line-break characters (they are written into generated files and messages)."""
    for path in specs:
        check_path_text(path, "spec path")
    if folder:
        check_path_text(folder, "output folder")


# ------------------------------------------------------------------ commands


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gradgen")
def main() -> None:
    """Generate TensorFlow custom-gradient ops from YAML specs.

    Exit status: 0 ok, 1 stale output (check), 2 bad spec or usage, 3 a derived gradient
    failed verification (or, with --strict-accuracy, the accuracy audit), 4 the output
    could not be written (nothing changed), 123 internal error, 130 interrupted (Ctrl-C).
    """


@main.command()
@_common
@click.option("--prune", is_flag=True, help="Delete orphaned generated files.")
@click.option("--dry-run", is_flag=True, help="Say what would change; write nothing.")
@click.option("--emit-tests", "tests_dir", default=None,
              help="Also write a pytest module per spec into this folder.")
def build(specs, out_dir, no_verify, strict_accuracy, verbosity, error_format, prune, dry_run,
          tests_dir):
    """Write OUT/<module>.py for each SPEC (only files whose bytes change)."""
    specs, out, verify, config, reporter = _settings(
        specs, out_dir, no_verify, verbosity, error_format, strict_accuracy
    )
    tests_dir = tests_dir or config.emit_tests
    _run(lambda: _check_paths([], tests_dir), reporter)

    def action():
        from .outputs import apply_all

        # every output is ready before the first file is written
        generated, outputs = _plan(specs, out, verify, tests_dir, reporter, prune)
        statuses = outputs[0].statuses
        reporter.end_progress()
        if verify:
            _note_unverified(generated, reporter)
        _note_audit(generated, reporter)
        verb = {"changed": "write", "missing": "write", "orphaned": "prune" if prune else
                "orphaned", "unchanged": "unchanged", "temporary": "remove"}
        if not dry_run:
            apply_all(outputs)
        done = {"write": "wrote", "prune": "pruned", "remove": "removed"}
        for output in outputs:
            for s in output.statuses:
                word = verb[s.state]
                if not dry_run:
                    word = done.get(word, word)
                reporter.detail(f"{word} {Path(output.folder) / s.path}")
        written = sum(s.state in ("changed", "missing") for s in statuses)
        unchanged = sum(s.state == "unchanged" for s in statuses)
        orphans = sum(s.state == "orphaned" for o in outputs for s in o.statuses)
        summary = f"{written} written, {unchanged} unchanged"
        if orphans:
            summary += f", {orphans} pruned" if prune else (
                f", {orphans} orphaned (--prune deletes)"
            )
        if tests_dir:
            tests_written = sum(s.state in ("changed", "missing")
                                for s in outputs[1].statuses)
            summary += f"; tests: {tests_written} written"
        temporaries = sum(s.state == "temporary" for o in outputs for s in o.statuses)
        if temporaries:
            summary += f"; {temporaries} stale temporary file{'s' if temporaries > 1 else ''}"
            summary += " removed" if not dry_run else " to remove"
        reporter.info(("dry run: " if dry_run else "") + summary.replace(
            "written", "to write" if dry_run else "written"))
        return EXIT_OK

    sys.exit(_run(action, reporter))


@main.command()
@_common
@click.option("--emit-tests", "tests_dir", default=None,
              help="Also check the pytest modules build --emit-tests writes there.")
@click.option("--max-diff-lines", default=MAX_DIFF_LINES, show_default=True,
              type=click.IntRange(min=0), help="Cap on the diff lines printed per file.")
def check(specs, out_dir, no_verify, strict_accuracy, verbosity, error_format, tests_dir,
          max_diff_lines):
    """Exit 1 with a diff if OUT is missing, stale or has orphans; 0 if all current."""
    specs, out, verify, config, reporter = _settings(
        specs, out_dir, no_verify, verbosity, error_format, strict_accuracy
    )
    tests_dir = tests_dir or config.emit_tests
    _run(lambda: _check_paths([], tests_dir), reporter)

    def action():
        from .outputs import refuse_foreign_files

        _, outputs = _plan(specs, out, verify, tests_dir, reporter)
        refuse_foreign_files(outputs)  # build would refuse: not "stale, run build"
        statuses = [(o.folder, s) for o in outputs for s in o.statuses]
        reporter.end_progress()
        stale = [(folder, s) for folder, s in statuses if s.state != "unchanged"]
        for folder, s in statuses:
            reporter.detail(f"{s.state} {Path(folder) / s.path}")
        if not stale:
            reporter.info(f"{len(statuses)} up to date")
            return EXIT_OK
        for folder, s in stale:
            lines = s.diff.splitlines(keepends=True)
            click.echo(printable("".join(lines[:max_diff_lines])), nl=False)
            if len(lines) > max_diff_lines:
                click.echo(f"... ({len(lines) - max_diff_lines} more diff lines)")
            if reporter.error_format == "github":
                reporter.error(_describe(s), _Where(str(Path(folder) / s.path)), "stale")
        names = "; ".join(f"{Path(folder) / s.path}: {_describe(s)}" for folder, s in stale)
        named = [p for p in specs if p not in config.spec_paths_or_empty()]
        command = "gradgen build" + (" " + " ".join(specs) if named else "")
        command += f" -o {out}" if out_dir else ""
        command += f" --emit-tests {tests_dir}" if tests_dir and tests_dir != config.emit_tests else ""
        prune = " --prune" if any(s.state == "orphaned" for _, s in stale) else ""
        click.echo(printable(f"gradgen: stale generated code ({names}); run: {command}{prune}"),
                   err=True)
        return EXIT_STALE

    sys.exit(_run(action, reporter))


def _plan(specs, out, verify, tests_dir, reporter: Reporter, prune: bool = False):
    """(generated modules, :func:`gradgen.outputs.plan_build`'s outputs) of ``specs``:
    what build writes and check compares, within the build's time budget."""
    from .emit import build_budget, generate_all, generate_tests, module_files, runtime_files
    from .outputs import plan_build

    with build_budget():
        generated = generate_all(specs, out, verify, reporter.progress,
                                 reporter.strict_accuracy)
        # the runtime serves the modules the build leaves in the folder too (with
        # --prune, not the orphans it deletes)
        files = {**module_files(generated), **runtime_files(generated, out, specs, prune)}
        test_files = generate_tests(generated, tests_dir, out) if tests_dir else None
        return generated, plan_build(out, files, specs, tests_dir, test_files, prune)


def _note_unverified(generated, reporter: Reporter) -> None:
    for g in generated:
        for op, sampled in g.ranges.items():
            if sampled is None and reporter.verbosity >= 0:
                click.echo(
                    f"gradgen: note: {g.doc.model.module}.{op} was not verified numerically "
                    "(no finite sample in the tried input ranges, or shapes too large)",
                    err=True,
                )


def _note_audit(generated, reporter: Reporter) -> None:
    """One note per op and derived order whose gradient the accuracy audit found NaN or
    inf where the exact gradient is finite (not an error without --strict-accuracy,
    which applies to the first order)."""
    if reporter.verbosity < 0:
        return
    for g in generated:
        for op, audit in g.audits.items():
            for k, a in enumerate((audit, *g.level_audits.get(op, ())), start=1):
                bad = sorted({t.input for t in a.gradients if t.nonfinite})
                if not bad:
                    continue
                which = "" if k == 1 else f" of order {k}"
                click.echo(
                    f"gradgen: note: {g.doc.model.module}.{op}: the accuracy audit{which} "
                    f"found NaN or inf gradients where the exact ones are finite (inputs: "
                    f"{', '.join(bad)}); see gradgen explain {g.doc.path} "
                    f"{op.split(' (')[0]}",
                    err=True,
                )


class _Where:
    def __init__(self, path):
        self.path, self.line, self.col = path, 1, 1

    def __str__(self):
        return self.path


def _describe(status) -> str:
    if status.state == "changed":
        from .runtime import FILE

        what = "helpers" if Path(status.path).name == FILE else "ops"
        return f"changed {what}: " + ", ".join(status.ops) if status.ops else "changed"
    if status.state in ("orphaned", "temporary"):
        return f"{status.state}, {status.ops[0]}"
    return status.state


@main.command()
@click.argument("spec", type=click.Path(dir_okay=False))
@click.argument("op", required=False)
@click.option("--format", "fmt", type=click.Choice(["text", "markdown"]), default="text",
              help="markdown (with LaTeX) for a pull-request comment.")
@click.option("--dtype", type=click.Choice(["float16", "bfloat16", "float32", "float64"]),
              default=None,
              help="For an op generated for several dtypes: the one to explain "
              "(default: the one Python numbers convert to).")
def explain(spec, op, fmt, dtype):
    """Show each op's forward, partials, stable rewrites and reduction axes."""
    reporter = Reporter()

    def action():
        from .explain import explain_spec

        click.echo(printable(explain_spec(spec, op, fmt, dtype)), nl=False)
        return EXIT_OK

    sys.exit(_run(action, reporter))


@main.command()
@click.argument("path", default="spec.yaml", type=click.Path(dir_okay=False))
def init(path):
    """Write a commented starter spec to PATH (default spec.yaml)."""
    reporter = Reporter()

    def action():
        from .render import starter_spec

        target = Path(check_path_text(path, "spec path"))
        text = starter_spec(target.stem).encode("utf-8")
        try:  # O_EXCL: never through an existing file or a (dangling) symbolic link
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            raise UsageError(f"{path} exists; not overwriting it") from None
        except OSError as e:
            raise OutputError(f"cannot create {path}: {describe(e)}") from None
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(text)
        except OSError as e:
            os.unlink(target)
            raise OutputError(f"cannot write {path}: {describe(e)}") from None
        reporter.info(f"wrote {path}; build it with: gradgen build {path}")
        return EXIT_OK

    sys.exit(_run(action, reporter))


@main.command()
def schema():
    """Print the JSON Schema of a spec."""
    from .spec import json_schema

    click.echo(json.dumps(json_schema(), indent=2, sort_keys=False))
    sys.exit(EXIT_OK)
