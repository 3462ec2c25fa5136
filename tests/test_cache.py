"""The derivation cache: same output with and without it, hits for unchanged ops, misses
for changed ones, and corrupt entries ignored."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import gradgen.pipeline
from conftest import EXAMPLES
from gradgen import cache
from gradgen.emit import generate


@pytest.fixture
def cached(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADGEN_CACHE", "1")
    monkeypatch.setenv("GRADGEN_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


def _count_derivations(monkeypatch):
    calls = []
    original = gradgen.pipeline.derive_op

    def counting(doc, index):
        calls.append(doc.model.ops[index].name)
        return original(doc, index)

    monkeypatch.setattr(gradgen.pipeline, "derive_op", counting)
    return calls


def test_cached_output_is_identical_and_skips_derivation(cached, monkeypatch):
    shutil.copy(EXAMPLES / "seeds.yaml", cached / "seeds.yaml")
    spec = str(cached / "seeds.yaml")
    monkeypatch.setenv("GRADGEN_CACHE", "0")
    uncached = generate([spec], str(cached / "out"))
    monkeypatch.setenv("GRADGEN_CACHE", "1")
    calls = _count_derivations(monkeypatch)
    first = generate([spec], str(cached / "out"))
    assert first == uncached and len(calls) == 5
    second = generate([spec], str(cached / "out"))
    assert second == uncached and len(calls) == 5  # nothing derived again


def test_only_changed_ops_are_derived_again(cached, monkeypatch):
    path = cached / "seeds.yaml"
    shutil.copy(EXAMPLES / "seeds.yaml", path)
    generate([str(path)], str(cached / "out"))
    path.write_text(path.read_text().replace("output: x * y", "output: x * y * 3"))
    calls = _count_derivations(monkeypatch)
    generate([str(path)], str(cached / "out"))
    assert calls == ["bar"]


def test_corrupt_entries_are_misses(cached, monkeypatch):
    shutil.copy(EXAMPLES / "seeds.yaml", cached / "seeds.yaml")
    spec = str(cached / "seeds.yaml")
    expected = generate([spec], str(cached / "out"))
    for entry in (cached / "cache").rglob("*.json"):
        entry.write_text("{not json")
    assert generate([spec], str(cached / "out")) == expected


_ORDERED = """\
version: 1
module: ordered
ops:
  - name: scaled
    inputs: {x: [null], y: [null]}
    output: x * exp(y)
  - name: pair
    inputs: {p: [3], q: [3]}
    where: {u: p * q, v: p + q}
    outputs: {first: u * v, second: u - v}
"""
# the same ops with their inputs, intermediates and outputs in the other order
_REORDERED = (_ORDERED.replace("{x: [null], y: [null]}", "{y: [null], x: [null]}")
              .replace("{p: [3], q: [3]}", "{q: [3], p: [3]}")
              .replace("{u: p * q, v: p + q}", "{v: p + q, u: p * q}")
              .replace("{first: u * v, second: u - v}", "{second: u - v, first: u * v}"))


def test_order_of_inputs_and_outputs_is_part_of_the_key(cached, monkeypatch):
    """An op's inputs are its signature and its outputs its return tuple: a spec that
    lists them in another order is another op. The key once sorted the spec's mappings,
    so with the first spec's entries cached the second generated ``scaled(x, y)`` for
    ``inputs: {y, x}`` (arguments silently swapped) and returned ``(first, second)``."""
    for text, other in ((_ORDERED, _REORDERED), (_REORDERED, _ORDERED)):
        spec = cached / "ordered.yaml"
        spec.write_text(other)
        monkeypatch.setenv("GRADGEN_CACHE", "0")
        expected = generate([str(spec)], str(cached / "out"))
        monkeypatch.setenv("GRADGEN_CACHE", "1")
        spec.write_text(text)
        generate([str(spec)], str(cached / "out"))  # caches the ops in text's order
        spec.write_text(other)
        assert generate([str(spec)], str(cached / "out")) == expected
    module = expected["ordered.py"]  # the last: _ORDERED
    assert "def scaled(x, y):" in module and "def pair(p, q):" in module
    assert "return _with_jvp((first, second), (p, q), grad), grad" in module


def test_an_entry_edited_only_in_its_order_is_a_miss(cached):
    """The checksum covers the order of the stored mappings as well as their contents."""
    k = cache.key("op", {"a": 1})
    cache.put(k, {"first": 1, "second": 2})
    assert cache.get(k) == {"first": 1, "second": 2}
    (path,) = (cached / "cache").rglob("*.json")
    entry = json.loads(path.read_text())
    entry["value"] = {"second": 2, "first": 1}
    path.write_text(json.dumps(entry))
    assert cache.get(k) is None


def test_fingerprint_covers_the_numerical_libraries(monkeypatch):
    """The audit's sentence in each docstring depends on mpmath (its gmpy2 backend once
    gave other values than its pure-Python one) and NumPy: a cache shared between two
    environments returned whichever result was stored first."""
    import mpmath
    from importlib import metadata

    original = cache.fingerprint()
    try:
        for patch in (lambda: monkeypatch.setattr(mpmath.libmp, "BACKEND", "other"),
                      lambda: monkeypatch.setattr(
                          metadata, "version",
                          lambda d, real=metadata.version: "0.0" if d == "numpy" else real(d))):
            patch()
            cache.fingerprint.cache_clear()
            assert cache.fingerprint() != original
            monkeypatch.undo()
    finally:
        cache.fingerprint.cache_clear()
    assert cache.fingerprint() == original


def test_fingerprint_covers_subpackages_and_templates():
    from gradgen.render import templates_dir

    names = {p.relative_to(p.parent.parent).as_posix() for p in cache.code_files()}
    assert "stability/engine.py" in names and "families/logexp.py" in names
    assert "derive/reverse.py" in names and "gradgen/cache.py" in names
    templates = {f"templates/{p.name}" for p in templates_dir().glob("*.j2")}
    assert templates and templates <= names  # every template, e.g. runtime.py.j2
    helpers = {f"runtime/{p.name}" for p in (templates_dir() / "runtime").glob("*.j2")}
    assert len(helpers) >= 20 and helpers <= names  # the runtime helpers' own folder


@pytest.fixture
def code_copy(tmp_path, monkeypatch):
    """gradgen's code and templates copied to ``tmp_path``, with code_files() and
    fingerprint() reading the copy (so a test may edit it)."""
    import gradgen.render
    from gradgen.render import templates_dir

    package = tmp_path / "gradgen"
    shutil.copytree(Path(cache.__file__).resolve().parent, package,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copytree(templates_dir(), tmp_path / "templates")
    monkeypatch.setattr(cache, "__file__", str(package / "cache.py"))
    monkeypatch.setattr(gradgen.render, "templates_dir", lambda: tmp_path / "templates")
    cache.fingerprint.cache_clear()
    yield tmp_path
    cache.fingerprint.cache_clear()  # the next caller hashes the real code again


def test_keys_depend_on_gradgen_code(code_copy):
    """Editing any one of gradgen's source files or templates (one byte appended) changes
    the fingerprint and so every key; undoing the edit gives the old key back."""
    files = cache.code_files()
    assert all(code_copy in f.parents for f in files)
    assert any(f.suffix == ".j2" for f in files) and any(f.name == "reverse.py" for f in files)
    original = cache.fingerprint()
    original_key = cache.key("op", {"a": 1})
    assert len(original) == 64 and original_key != cache.key("op", {"a": 2})
    seen = {original}
    for path in files:
        text = path.read_bytes()
        path.write_bytes(text + b"\n")
        cache.fingerprint.cache_clear()
        changed = cache.fingerprint()
        assert changed not in seen, f"editing {path.name} leaves the cache key unchanged"
        assert cache.key("op", {"a": 1}) != original_key
        seen.add(changed)
        path.write_bytes(text)
    cache.fingerprint.cache_clear()
    assert cache.fingerprint() == original and cache.key("op", {"a": 1}) == original_key


def test_no_cache_flag_neither_reads_nor_writes(cached, monkeypatch):
    from click.testing import CliRunner

    from gradgen.cli import main

    shutil.copy(EXAMPLES / "seeds.yaml", cached / "seeds.yaml")
    monkeypatch.chdir(cached)
    runner = CliRunner()
    result = runner.invoke(main, ["build", "--no-cache", "seeds.yaml", "-o", "out"])
    assert result.exit_code == 0, result.output
    assert not (cached / "cache").exists()
    monkeypatch.setenv("GRADGEN_CACHE", "1")  # the flag set it to 0 in this process
    generate(["seeds.yaml"], "out")  # fills the cache
    calls = _count_derivations(monkeypatch)
    result = runner.invoke(main, ["check", "--no-cache", "seeds.yaml", "-o", "out"])
    assert result.exit_code == 0, result.output
    assert len(calls) == 5  # every op derived again


@pytest.mark.parametrize("value", ["0", "false", "False", "FALSE", "no", "No", "off", "OFF",
                                   " Off ", "0\n"])
def test_any_spelling_of_off_disables_the_cache(cached, monkeypatch, value):
    monkeypatch.setenv("GRADGEN_CACHE", value)
    assert not cache.enabled()
    cache.put("k" * 64, {"a": 1})
    assert not (cached / "cache").exists()


@pytest.mark.parametrize("value", ["1", "true", "On", "yes", ""])
def test_other_values_leave_the_cache_on(cached, monkeypatch, value):
    monkeypatch.setenv("GRADGEN_CACHE", value)
    assert cache.enabled()
