"""The file side of the boundary: formats, schemas, JSON in and out, errors.

:class:`InputError` names the file, the JSON path and the bad value; schema
errors are described in words here, and record errors (FieldError) become
InputErrors through :func:`build_in_file`. :func:`write_json` writes atomically;
:func:`output_file` and :func:`output_folder` check where a command will write
before it works, with an InputError naming the path.

:func:`load_json` reads strict JSON: what the standard reader silently
accepts or cannot survive is an InputError too, naming the JSON path and the
value: a key given twice in one object (JSON leaves it undefined; Python
keeps the last), an integer outside the signed 64-bit range (the solvers'
integers are 64-bit), a number that is not finite (``NaN``, ``Infinity``,
``1e999``), and nesting deeper than :data:`MAX_DEPTH` levels (found before
parsing, so the reader's recursion never runs out).
"""

from __future__ import annotations

import difflib
import json
import math
import os
import re
import secrets
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import jsonschema

from whale_opt.problem_data import FieldError

INSTANCE_FORMAT = "whale-opt/instance@1"
DECISION_FORMAT = "whale-opt/decision@1"
SCHEMAS = {"instance": "instance.schema.json", "decision": "decision.schema.json"}

T = TypeVar("T")
MAX_DEPTH = 64
"""Objects and arrays nest at most this deep in a file (ours need 5)."""
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class InputError(ValueError):
    """A bad input file: names the file, the JSON path and the value (in the
    message; ``value`` too, when there is one: None for a missing field)."""

    def __init__(self, source: str, path: str, message: str, value: Any = None) -> None:
        self.source = source
        self.path = path
        self.message = message
        self.value = value
        super().__init__(f"{source}: {path}: {message}" if path else f"{source}: {message}")


@cache
def schema(kind: str) -> dict[str, Any]:
    """The published JSON Schema of ``kind`` (``instance`` or ``decision``)."""
    if kind not in SCHEMAS:
        raise ValueError(f"unknown schema {kind!r}; choose from {', '.join(SCHEMAS)}")
    text = resources.files("whale_opt.schemas").joinpath(SCHEMAS[kind]).read_text("utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def _show(value: Any, limit: int = 60) -> str:
    """``value`` as JSON, cut short: how every message quotes a bad value."""
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _json_path(parts: Any) -> str:
    path = ""
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "(top level)"


_BOUNDS = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<"}


def _describe(spec: Any) -> str:
    """A short English description of what schema ``spec`` accepts."""
    if not isinstance(spec, dict):
        return "anything" if spec is True else "nothing"
    if "enum" in spec:
        return "one of " + ", ".join(json.dumps(v) for v in spec["enum"])
    if "const" in spec:
        return json.dumps(spec["const"])
    kinds = spec.get("type", "value")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    text = " or ".join(f"{'an' if k[0] in 'aeiou' else 'a'} {k}" for k in kinds)
    if "object" in kinds and spec.get("required"):
        text += " with " + ", ".join(json.dumps(k) for k in spec["required"])
    return text


def _schema_problem(error: jsonschema.ValidationError) -> tuple[str, str, Any]:
    """The JSON path, a message naming the bad value, and the value (None for a
    missing field), for one schema error."""
    parts = list(error.absolute_path)
    kind, expected, value = error.validator, error.validator_value, error.instance
    spec = error.schema
    if kind == "required" and isinstance(value, dict):
        missing = next(name for name in expected if name not in value)
        message = "is required but missing"
        if "then" in error.schema_path and "action" in value:
            message += f" (action {_show(value['action'])} needs {', '.join(expected)})"
        if "properties" in spec:  # a field the object may not have, spelt like the missing one
            unknown = [name for name in value if name not in spec["properties"]]
            close = difflib.get_close_matches(missing, unknown, n=1)
            if close:
                message += f"; is {json.dumps(close[0])} a typo of it?"
        return _json_path([*parts, missing]), message, None
    if kind == "additionalProperties" and expected is False and isinstance(value, dict):
        allowed = sorted(spec.get("properties", {}))
        extra = next(name for name in value if name not in allowed)
        close = difflib.get_close_matches(extra, allowed, n=1)
        hint = (
            f"did you mean {json.dumps(close[0])}?" if close else "allowed: " + ", ".join(allowed)
        )
        path = _json_path([*parts, extra])
        return path, f"unknown field (got {_show(value[extra])}); {hint}", value[extra]
    if kind in ("type", "enum", "const"):
        message = f"must be {_describe(spec)}"
    elif kind in ("oneOf", "anyOf"):
        message = "must be " + " or ".join(_describe(option) for option in expected)
    elif kind in _BOUNDS:
        message = f"must be {_BOUNDS[kind]} {expected}"
    elif kind in ("minLength", "minItems", "minProperties"):
        unit = {"minLength": "character", "minItems": "item", "minProperties": "entry"}[kind]
        message = "must not be empty" if expected == 1 else f"needs at least {expected} {unit}s"
    elif kind == "maxItems":
        message = f"needs at most {expected} items"
    elif kind == "pattern":
        message = f"must match the pattern {expected}"
    else:
        message = error.message
    return _json_path(parts), f"{message} (got {_show(value)})", value


@cache
def _validator(kind: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(schema(kind))


def _validate(raw: Any, kind: str, source: str) -> None:
    error = jsonschema.exceptions.best_match(_validator(kind).iter_errors(raw))
    if error is not None:
        raise InputError(source, *_schema_problem(error))


def _check_format(raw: Any, expected: str, source: str) -> None:
    """Refuse another format or version before schema details can confuse."""
    if isinstance(raw, dict) and raw.get("format") not in (None, expected):
        raise InputError(
            source,
            "format",
            f"unsupported format (got {_show(raw['format'])}); expected {json.dumps(expected)}",
        )


def load_json(path: str | Path) -> Any:
    """Parse a file as JSON; an unreadable, empty, binary or broken file is an InputError."""
    source = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(source, "(file)", f"cannot read: {exc.strerror or exc}") from exc
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(
            source,
            f"byte {exc.start}",
            f"is not UTF-8 text, perhaps a binary file (got byte 0x{data[exc.start]:02x})",
        ) from exc
    if not text.strip():
        raise InputError(source, "(file)", f"is empty: no JSON value (got {len(data)} bytes)")
    return parse_json(source, text)


def parse_json(source: str, text: str, line: int = 0) -> Any:
    """``text`` as strict JSON (the rules above); an :class:`InputError` names
    where it breaks one. With ``line``, ``text`` is that line of ``source`` (a
    JSON-lines record), and the errors say so: ``line 3: gpus``, ``line 3 column 9``.
    """

    def place(lineno: int, colno: int) -> str:
        return f"line {line or lineno} column {colno}"

    def at(parts: Sequence[str | int | None]) -> str:
        return f"line {line}: {_json_path(parts)}" if line else _json_path(parts)

    deep = _too_deep(text)
    if deep is not None:
        parts, offset = deep
        if None in parts:  # an object without a key: malformed there, so a place, not a path
            lineno = text.count("\n", 0, offset) + 1
            where = place(lineno, offset - text.rfind("\n", 0, offset))
        else:
            where = at(parts)
        got = _show(text[offset : offset + 20])
        raise InputError(source, where, f"nested deeper than {MAX_DEPTH} levels (got {got})")
    hooks = _StrictHooks()
    try:
        value = json.loads(
            text,
            object_pairs_hook=hooks.object,
            parse_int=hooks.integer,
            parse_float=hooks.floating,
            parse_constant=hooks.constant,
        )
    except json.JSONDecodeError as exc:
        found = text[exc.pos : exc.pos + 20].split("\n")[0]
        end = "end of file" if exc.pos >= len(text) and not line else "end of line"
        got = _show(found) if found else end
        raise InputError(
            source, place(exc.lineno, exc.colno), f"malformed JSON: {exc.msg} (got {got})"
        ) from exc
    except RecursionError as exc:  # not reached after _too_deep; never a traceback
        where = f"line {line}" if line else "(file)"
        raise InputError(source, where, "nested too deep to read") from exc
    if hooks.refused:
        path, refused = _first_refused(value)
        raise InputError(source, at(path), refused.message)
    return value


class _Refused:
    """Stands in the parsed JSON for a value :func:`load_json` refuses."""

    def __init__(self, message: str) -> None:
        self.message = message

    def __repr__(self) -> str:
        return "(refused)"


def _digits(text: str) -> str:
    return text if len(text) <= 40 else f"{text[:18]}...{text[-18:]}, {len(text)} characters"


class _StrictHooks:
    """The parser's hooks: each refused value becomes a :class:`_Refused`, found
    with its path after parsing (a hook cannot know where it is)."""

    def __init__(self) -> None:
        self.refused = False

    def _refuse(self, message: str) -> _Refused:
        self.refused = True
        return _Refused(message)

    def object(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key not in out:
                out[key] = value
            elif not isinstance(out[key], _Refused):  # else already refused: the first says
                first = out[key]
                out[key] = self._refuse(
                    f"duplicate key: given more than once in one object"
                    f" (got {_show(first, 30)}, then {_show(value, 30)})"
                )
        return out

    def integer(self, text: str) -> int | _Refused:
        # More than 19 digits is out of range: no need to convert (Python refuses
        # to convert over 4,300 digits at all).
        if len(text.lstrip("-")) <= 19 and INT64_MIN <= (value := int(text)) <= INT64_MAX:
            return value
        return self._refuse(
            f"integer out of the 64-bit range {INT64_MIN}..{INT64_MAX} (got {_digits(text)})"
        )

    def floating(self, text: str) -> float | _Refused:
        value = float(text)
        if math.isfinite(value):
            return value
        return self._refuse(f"number too large for a 64-bit float (got {_digits(text)})")

    def constant(self, text: str) -> _Refused:
        return self._refuse(f"is not a JSON number: NaN and Infinity are not JSON (got {text})")


def _first_refused(value: Any) -> tuple[list[str | int], _Refused]:
    """The first refused value in document order, with its JSON path parts."""
    stack: list[tuple[Any, list[str | int]]] = [(value, [])]
    while stack:
        node, parts = stack.pop()
        if isinstance(node, _Refused):
            return parts, node
        if isinstance(node, dict):
            stack.extend((item, [*parts, key]) for key, item in reversed(node.items()))
        elif isinstance(node, list):
            stack.extend((item, [*parts, k]) for k, item in reversed(list(enumerate(node))))
    raise AssertionError("a hook refused a value the parsed JSON does not hold")


_STRING = r'"(?:[^"\\]|\\.)*"'
_STRINGS = re.compile(_STRING, re.DOTALL)
_BRACKETS = re.compile(r"[\[\]{}]")
_TOKENS = re.compile(_STRING + r"|[\[\]{},:]", re.DOTALL)


def _key(token: str) -> str:
    try:
        key: str = json.loads(token)
    except ValueError:  # a bad escape: the parser reports it, if it gets that far
        return token[1:-1]
    return key


def _too_deep(text: str) -> tuple[list[str | int | None], int] | None:
    """Where ``text`` first nests deeper than :data:`MAX_DEPTH`: the JSON path
    parts of that value (None for an object's key where the text has none: it
    is malformed there) and its offset; None when it never nests that deep.

    A scan of the brackets outside strings decides; only a file that is too
    deep is scanned again, token by token, for the path.
    """
    depth = 0
    for bracket in _BRACKETS.findall(_STRINGS.sub("", text)):
        depth += 1 if bracket in "[{" else -1
        if depth > MAX_DEPTH:
            break
    else:
        return None
    # Each open container: [index in an array | key in an object, expecting a key].
    frames: list[list[Any]] = []
    for token in _TOKENS.finditer(text):
        mark = token.group()
        if mark in ("[", "{"):
            if len(frames) == MAX_DEPTH:
                return [frame[0] for frame in frames], token.start()
            frames.append([0, False] if mark == "[" else [None, True])
        elif mark in ("]", "}"):
            if frames:
                frames.pop()
        elif not frames:
            continue
        elif mark == ",":
            top = frames[-1]
            if isinstance(top[0], int):
                top[0] += 1
            else:
                top[1] = True
        elif mark == ":":
            frames[-1][1] = False
        elif frames[-1][1]:  # a key
            frames[-1][0] = _key(mark)
    return [], 0


def build_in_file(source: str, prefix: str, make: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``make(*args, **kwargs)``, its :class:`FieldError` raised as an
    :class:`InputError` naming ``source`` and the field under ``prefix`` (a
    record or a check run on what file ``source`` gave)."""
    try:
        return make(*args, **kwargs)
    except FieldError as exc:
        located = exc.within(prefix) if prefix else exc
        message = f"{located.message} (got {_show(located.value)})"
        raise InputError(source, located.path, message, located.value) from exc


def write_json(path: str | Path, payload: Mapping[str, Any]) -> None:
    """Write ``payload`` as JSON atomically (:func:`write_text`)."""
    write_text(path, json.dumps(payload, indent=1) + "\n")


def write_text(path: str | Path, text: str) -> None:
    """Write ``text`` atomically (temp file, fsync, rename).

    On any failure the target is untouched and no temp file is left. The
    temp file is created like any new file (mode 0o666 less the umask), not
    with ``mkstemp``'s owner-only 0o600, so outputs stay readable by others.
    """
    target = Path(path)
    # Beside the target, named even when the target has no name (``Path("")`` is
    # ``.``): then the rename fails with an OSError, as for any folder.
    temp = target.parent / f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    handle = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def output_file(path: str | Path, inputs: Iterable[str | Path] = ()) -> Path:
    """``path`` checked as a file :func:`write_text` can write, before any work.

    An :class:`InputError` names ``path`` when it is a folder, when its folder
    is missing, not a folder or not writable, or when it is one of ``inputs``
    (the same file under any name: a link too), so that an output never
    replaces what was read.
    """
    target = Path(path)
    source = str(path)
    if target.is_dir():
        raise InputError(source, "", "cannot write: is a directory")
    folder = target.parent
    if not folder.is_dir():
        why = f"{folder} is not a directory" if folder.exists() else "no such directory"
        raise InputError(source, "", f"cannot write: {why}")
    for given in inputs:
        if target.exists() and Path(given).exists() and os.path.samefile(target, given):
            raise InputError(
                source, "", f"cannot write: is the input file {given}; give another path"
            )
    _probe(folder, source)
    return target


def output_folder(path: str | Path) -> Path:
    """``path`` checked as a folder to write files into, before any work.

    Nothing is created: a missing folder must be one its nearest existing
    parent lets the command make (the writers make it, with its parents).
    An :class:`InputError` names ``path`` when it or that parent is a file,
    or cannot be written in.
    """
    target = Path(path)
    source = str(path)
    if target.exists() and not target.is_dir():
        raise InputError(source, "", "cannot write: not a directory")
    existing = next(folder for folder in (target, *target.parents) if folder.exists())
    if not existing.is_dir():
        raise InputError(source, "", f"cannot write: {existing} is not a directory")
    _probe(existing, source)
    return target


def _probe(folder: Path, source: str) -> None:
    """Create and remove a file in ``folder``: the one sure test that it takes files."""
    try:
        with tempfile.TemporaryFile(dir=folder, prefix=".whale-opt-"):
            pass
    except OSError as exc:
        raise InputError(source, "", f"cannot write: {exc.strerror or exc}") from exc
