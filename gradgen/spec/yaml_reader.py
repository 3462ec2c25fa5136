"""Read a composed YAML node tree into plain data, keeping the position of every value.

Receives: the root node PyYAML's safe composer built from a spec's text (no value
constructed yet), with the spec's path and text.
Returns: :class:`YamlReader`, whose :meth:`~YamlReader.read` gives the plain data
(mappings, lists, scalars) and records, for each spec key path, the position of the
value and of its key, an :class:`~.positions.ExprAnchor` and the text as written for
each scalar, and the problems found (aliases, tags beyond the standard ones, keys that
are not strings, merge keys, duplicate keys, scalars that do not construct) instead of
raising. Also helpers over that data: :func:`expression_locs`, :func:`value_at`,
:func:`replace_at`.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from .positions import ExprAnchor, Loc


_DECIMAL = re.compile(r"^[-+]?(0|[1-9][0-9_]*)$")
_STANDARD_TAGS = {
    "tag:yaml.org,2002:str",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:null",
    "tag:yaml.org,2002:map",
    "tag:yaml.org,2002:seq",
}


class YamlReader:
    """Turns a composed PyYAML node tree into plain data plus positions."""

    def __init__(self, path: str, source: str):
        self.path = path
        self.source = source
        self.source_lines = source.splitlines()
        self.positions: dict[Loc, tuple[int, int]] = {}
        self.key_positions: dict[Loc, tuple[int, int]] = {}
        self.anchors: dict[Loc, ExprAnchor] = {}
        self.raw: dict[Loc, str] = {}
        self.errors: list[tuple[Loc, tuple[int, int], str]] = []
        self._seen: set[int] = set()
        self._constructor = yaml.SafeLoader("")

    def read(self, node: yaml.Node, loc: Loc = ()) -> Any:
        mark = (node.start_mark.line + 1, node.start_mark.column + 1)
        self.positions[loc] = mark
        if id(node) in self._seen:
            mark = self.key_positions.get(loc, mark)
            self.errors.append((loc, mark, "YAML aliases (*name) are not allowed in a spec"))
            return None
        self._seen.add(id(node))
        if node.tag not in _STANDARD_TAGS:
            self.errors.append((loc, mark, f"YAML tag {node.tag!r} is not allowed in a spec"))
            return None
        if isinstance(node, yaml.MappingNode):
            out: dict[str, Any] = {}
            for key_node, value_node in node.value:
                kmark = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
                if not isinstance(key_node, yaml.ScalarNode) or (
                    key_node.tag != "tag:yaml.org,2002:str" and key_node.style is not None
                ) or key_node.tag.endswith(":merge"):
                    what = "a merge key '<<'" if key_node.tag.endswith(":merge") else (
                        f"{key_node.value!r}" if isinstance(key_node, yaml.ScalarNode)
                        else "a collection"
                    )
                    self.errors.append((loc, kmark, f"keys must be strings; got {what}"))
                    continue
                key = key_node.value
                if key in out:
                    self.errors.append((loc + (key,), kmark, f"duplicate key '{key}'"))
                    continue
                self.key_positions[loc + (key,)] = kmark
                out[key] = self.read(value_node, loc + (key,))
            return out
        if isinstance(node, yaml.SequenceNode):
            return [self.read(item, loc + (i,)) for i, item in enumerate(node.value)]
        self.raw[loc] = node.value
        self._anchor(node, loc)
        if node.tag == "tag:yaml.org,2002:int" and not _DECIMAL.match(node.value):
            return node.value  # YAML 1.1 octal/sexagesimal forms (010, 1:30) stay text
        try:
            return self._constructor.construct_object(node, deep=True)
        except (yaml.YAMLError, ValueError, OverflowError) as e:
            self.errors.append((loc, mark, f"invalid scalar {node.value!r}: {e}"))
            return None

    def _anchor(self, node: yaml.ScalarNode, loc: Loc) -> None:
        line = node.start_mark.line + 1
        indent = 0
        if node.style in ("|", ">"):
            for text in self.source_lines[line:]:
                if text.strip():
                    indent = len(text) - len(text.lstrip(" "))
                    break
        self.anchors[loc] = ExprAnchor(
            line=line,
            col=node.start_mark.column + 1,
            style=node.style,
            indent=indent,
            single_line=node.start_mark.line == node.end_mark.line,
            source=self.source[node.start_mark.index: node.end_mark.index],
            value=node.value,
        )


def expression_locs(data: Any) -> list[Loc]:
    """Spec key paths whose values are expressions (kept as written, even if numeric)."""
    locs: list[Loc] = []
    if not isinstance(data, dict) or not isinstance(data.get("ops"), list):
        return locs
    for i, op in enumerate(data["ops"]):
        if not isinstance(op, dict):
            continue
        locs.append(("ops", i, "output"))
        for section in ("outputs", "where"):
            if isinstance(op.get(section), dict):
                locs.extend(("ops", i, section, k) for k in op[section])
    return locs


def replace_at(data: Any, loc: Loc, value: Any) -> None:
    for part in loc[:-1]:
        data = data[part]
    if isinstance(data, dict) and loc[-1] in data:
        data[loc[-1]] = value


def value_at(data: Any, loc: Loc) -> Any:
    for part in loc:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return None
    return data
