"""The ``gradgen`` command line.

Consumes: command-line arguments. Guarantees: exit status 0 when all is well, 1 when
``check`` finds stale or missing output, 2 for a bad spec or bad usage (every problem
printed as ``file:line:col: error: ...`` on stderr, nothing written), 123 for an internal
error. Never a Python traceback for a user error. TensorFlow is never imported.
"""

from __future__ import annotations

import sys
import traceback

import click

from . import __version__
from .errors import EXIT_INTERNAL, EXIT_OK, EXIT_STALE, GradgenError, SpecError

OUT_HELP = "Output folder for generated modules."


def _fail(error: GradgenError) -> None:
    if isinstance(error, SpecError):
        for diagnostic in error.diagnostics:
            click.echo(diagnostic.format(), err=True)
        n = len(error.diagnostics)
        click.echo(f"gradgen: {n} error{'s' if n != 1 else ''}; nothing written", err=True)
    elif getattr(error, "location", None) is not None:
        click.echo(f"{error.location}: error: {error}", err=True)
    else:
        click.echo(f"gradgen: error: {error}", err=True)
    sys.exit(error.exit_code)


def _run(action):
    try:
        return action()
    except GradgenError as e:
        _fail(e)
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception:  # a gradgen bug: say so, with the traceback for the report
        click.echo("gradgen: internal error (please report it with this output):", err=True)
        click.echo(traceback.format_exc(), err=True)
        sys.exit(EXIT_INTERNAL)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gradgen")
def main() -> None:
    """Generate TensorFlow custom-gradient ops from YAML specs."""


@main.command()
@click.argument("specs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("-o", "--out", "out_dir", default="generated", show_default=True, help=OUT_HELP)
def build(specs: tuple[str, ...], out_dir: str) -> None:
    """Write OUT/<module>.py for each SPEC (only files whose bytes change)."""

    def action():
        from .emit import generate, write_outputs

        files = generate(list(specs), out_dir)
        statuses = write_outputs(files, out_dir)
        written = sum(s.state != "unchanged" for s in statuses)
        click.echo(f"{written} written, {len(statuses) - written} unchanged")

    _run(action)
    sys.exit(EXIT_OK)


@main.command()
@click.argument("specs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("-o", "--out", "out_dir", default="generated", show_default=True, help=OUT_HELP)
def check(specs: tuple[str, ...], out_dir: str) -> None:
    """Exit 1 with a diff if OUT is missing or differs from what build would write."""

    def action():
        from .emit import compare_outputs, generate

        files = generate(list(specs), out_dir)
        stale = [s for s in compare_outputs(files, out_dir) if s.state != "unchanged"]
        for status in stale:
            click.echo(status.diff, nl=False)
        if stale:
            names = ", ".join(f"{s.path} ({s.state})" for s in stale)
            click.echo(
                f"gradgen: stale generated code: {names}; run: gradgen build "
                f"{' '.join(specs)} -o {out_dir}",
                err=True,
            )
            return EXIT_STALE
        click.echo(f"{len(files)} up to date")
        return EXIT_OK

    sys.exit(_run(action))
