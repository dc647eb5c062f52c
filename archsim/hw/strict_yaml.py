"""YAML loading that refuses a key given twice in one mapping: PyYAML keeps the last silently, so
``sms: 108`` followed by ``sms: 40`` lower in a hardware config (or in a trace's meta.yaml) would
change a number without a word. Used for every YAML input archsim reads."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Any

import yaml


class DuplicateKeyError(yaml.YAMLError):
    """A mapping names one key twice; the message says which and where."""


class NestedTooDeeplyError(yaml.YAMLError):
    """Collections nested past Python's recursion limit (``[[[[...``): no config is that deep."""


class AliasBombError(yaml.YAMLError):
    """Aliases that expand past MAX_EXPANDED_NODES (a "billion laughs" document of a few hundred
    bytes): building, printing or checking it would take exponential memory and time."""


# No config, calibration or meta.yaml comes near this: the largest preset has about 150 nodes.
MAX_EXPANDED_NODES = 1_000_000
# Nor this: the largest bundled meta.yaml is 10 kB. PyYAML's pure-Python parser takes about 5 s and
# 85 MB a MiB of text (4.3 MB: 23.6 s and 360 MB peak, measured), so a 1 GB file would take hours.
MAX_YAML_CHARS = 2**20


class TooLargeError(yaml.YAMLError):
    """More than MAX_YAML_CHARS of text."""


def read_yaml_text(path: Path) -> str:
    """The UTF-8 text of a YAML input file, read no further than the 4 MiB that MAX_YAML_CHARS
    characters can take.

    ``read_text`` read the whole file before the size check: a 512 MiB file took 1.1 GB before it
    was refused, and /dev/zero grew without end. A directory, FIFO (open would wait for a writer)
    or device is an OSError naming it, which every caller already reports in one line."""
    status = os.stat(path)
    mode = status.st_mode
    if not stat.S_ISREG(mode):
        kind = "a directory" if stat.S_ISDIR(mode) else "a FIFO, device or socket"
        raise OSError(errno.EINVAL, f"is {kind}, not a regular file", str(path))
    most_bytes = 4 * MAX_YAML_CHARS  # a UTF-8 character is at most 4 bytes
    with open(path, "rb") as handle:
        data = handle.read(most_bytes + 1)
    # decoded whole, so a bad byte's offset is the file's
    text = "" if len(data) > most_bytes else data.decode("utf-8")
    if len(data) > most_bytes or len(text) > MAX_YAML_CHARS:
        raise TooLargeError(
            f"{status.st_size / 2**20:.1f} MiB of text, over the {MAX_YAML_CHARS >> 20} MiB a "
            "config, calibration or meta.yaml may be"
        )
    return text


def _expanded_nodes(node: yaml.Node, memo: dict[int, int]) -> int:
    """Nodes of ``node`` with every alias expanded, counted once per distinct node (memo)."""
    if id(node) in memo:
        return memo[id(node)]
    memo[id(node)] = 1  # a recursive alias counts once instead of looping
    if isinstance(node, yaml.SequenceNode):
        children = list(node.value)
    elif isinstance(node, yaml.MappingNode):
        children = [part for pair in node.value for part in pair]
    else:
        children = []
    total = 1
    for child in children:
        total += _expanded_nodes(child, memo)
        if total > MAX_EXPANDED_NODES:
            break
    memo[id(node)] = total
    return total


class _UniqueKeyLoader(yaml.SafeLoader):
    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor` merges, not a key
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:  # an unhashable key: SafeLoader reports it itself
                continue
            if duplicate:
                raise DuplicateKeyError(
                    f"key {key!r} appears twice in one mapping (line {key_node.start_mark.line + 1})"
                )
        return super().construct_mapping(node, deep=deep)


def safe_load_unique(text: str) -> Any:
    """``yaml.safe_load`` that raises DuplicateKeyError for a key given twice in a mapping, and
    NestedTooDeeplyError (not a RecursionError traceback) for nesting past the recursion limit."""
    if len(text) > MAX_YAML_CHARS:
        raise TooLargeError(
            f"{len(text) / 2**20:.1f} MiB of text, over the {MAX_YAML_CHARS >> 20} MiB a config, "
            "calibration or meta.yaml may be"
        )
    loader = _UniqueKeyLoader(text)
    try:
        node = loader.get_single_node()  # what yaml.load does, with the expanded size checked
        if node is None:
            return None
        if _expanded_nodes(node, {}) > MAX_EXPANDED_NODES:
            raise AliasBombError(f"aliases expand past {MAX_EXPANDED_NODES:,} nodes")
        return loader.construct_document(node)
    except RecursionError:
        raise NestedTooDeeplyError("collections nested too deeply") from None
    finally:
        loader.dispose()


def yaml_problem(exc: yaml.YAMLError) -> str:
    """What to say about a YAML error in one line: the duplicate key, else the error's kind."""
    known = isinstance(
        exc, DuplicateKeyError | NestedTooDeeplyError | AliasBombError | TooLargeError
    )
    return str(exc) if known else exc.__class__.__name__


def yaml_refusal(path: object, exc: yaml.YAMLError) -> str:
    """The one-line refusal of a YAML input: a size past the cap is said as such, not as bad YAML."""
    if isinstance(exc, TooLargeError):
        return f"{path}: too large to read ({exc})"
    return f"{path}: not valid YAML ({yaml_problem(exc)})"
