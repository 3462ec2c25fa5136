"""The derivation cache: same output with and without it, hits for unchanged ops, misses
for changed ones, and corrupt entries ignored."""

from __future__ import annotations

import shutil

import pytest

import gradgen.derive
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
    original = gradgen.derive.derive_op

    def counting(doc, index):
        calls.append(doc.model.ops[index].name)
        return original(doc, index)

    monkeypatch.setattr(gradgen.derive, "derive_op", counting)
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


def test_fingerprint_covers_subpackages_and_templates():
    names = {p.relative_to(p.parent.parent).as_posix() for p in cache.code_files()}
    assert "stability/engine.py" in names and "families/logexp.py" in names
    assert "gradgen/derive.py" in names and any(n.endswith(".j2") for n in names)


def test_keys_depend_on_gradgen_code():
    assert cache.fingerprint() == cache.fingerprint()
    assert cache.key("op", {"a": 1}) != cache.key("op", {"a": 2})
    assert len(cache.fingerprint()) == 64


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
