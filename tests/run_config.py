"""The one way tests write a run config: sections as dicts, merged in layers, written as the TOML a run reads.

A test says what its run needs (``{"run": {"steps": 2}, "engine": TINY_ENGINE}``) instead of formatting TOML
by hand, so paths with quotes or backslashes, nested tables and inline maps come out right, and a layer
can change one key of a shared config without editing its text. ``tests/`` is on ``sys.path``:
``from run_config import write_run_config``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: The random tiny model served in-process: what most end-to-end tests run.
TINY_ENGINE: dict[str, Any] = {"kind": "embedded", "model": "tiny"}
#: A small, fast LoRA for the tiny model.
TINY_LORA: dict[str, Any] = {"r": 4, "alpha": 8}

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")  # fullmatch: "$" would let a key end in a newline


def merged(*layers: Mapping[str, Any]) -> dict[str, Any]:
    """The layers deep-merged, later ones winning key by key (a table merges, any other value replaces)."""
    out: dict[str, Any] = {}
    for layer in layers:
        for key, value in layer.items():
            if isinstance(value, Mapping) and isinstance(out.get(key), dict):
                out[key] = merged(out[key], value)
            else:
                out[key] = merged(value) if isinstance(value, Mapping) else value
    return out


def run_config_text(*layers: Mapping[str, Any]) -> str:
    """The TOML text of the layers merged (see ``merged``)."""
    return _table(merged(*layers), ())


def write_run_config(where: Path, *layers: Mapping[str, Any], name: str = "config.toml") -> Path:
    """Write the layers merged as a TOML run config: to ``where`` itself when it names a ``.toml`` file,
    else to ``where / name``. Returns the file's path."""
    path = where if where.suffix == ".toml" else where / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(run_config_text(*layers))
    return path


def _table(table: Mapping[str, Any], prefix: tuple[str, ...]) -> str:
    scalars = [f"{_key(k)} = {_value(v)}\n" for k, v in table.items() if not isinstance(v, Mapping)]
    text = (f"[{'.'.join(_key(p) for p in prefix)}]\n" if prefix else "") + "".join(scalars)
    for key, value in table.items():
        if isinstance(value, Mapping):
            text += ("\n" if text else "") + _table(value, (*prefix, str(key)))
    return text


def _key(key: object) -> str:
    text = str(key)
    return text if _BARE_KEY.fullmatch(text) else _string(text)


def _string(text: str) -> str:
    """A TOML basic string: JSON's escapes are TOML's, except that TOML refuses a raw DEL."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007F")


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str | Path):
        return _string(str(value))
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, Mapping):  # inside an array: an inline table
        return "{" + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no TOML form for {value!r} ({type(value).__name__}); TOML has no null: leave the key out")
