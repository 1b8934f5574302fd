"""The configuration reference page, read from the pydantic models of the configuration files.

Used by ``scripts/gen_docs.py``. Every file is found from its loader (a public ``load_*`` function
of the module whose return annotation is a pydantic model), and every section from the root
model's fields, so a new section or key appears in the reference without touching this script.
A key's description is its ``Field(description=...)`` or else the ``#:`` comment lines directly
above it in the source.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import re
import textwrap
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import annotated_types
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

#: (module, title, anchor prefix, command) of each configuration file, in page order.
FILES = (
    ("mcp_approval.config", "The deployment file", "", "mcp-approval serve --config FILE"),
    ("mcp_approval.reference.config", "The arap-server file", "arap-", "mcp-approval arap-server --config FILE"),
)
_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")
_SCALARS = {
    str: "string",
    SecretStr: "string (secret: never printed)",
    bool: "boolean",
    int: "integer",
    float: "number",
    Path: "path",
    Any: "any",
}


class DocsConfigError(Exception):
    """A configuration module that cannot be documented (no loader, unreadable source)."""


@dataclass(frozen=True)
class Section:
    """One TOML table of a file: its header, its model, the anchor of its heading, whether it must be present."""

    header: str
    model: type[BaseModel]
    anchor: str
    required: bool = False


def configuration_page() -> tuple[str, list[str]]:
    """The page's Markdown, and the ``file: [section] key`` names that have no description."""
    lines = [
        "# Configuration reference\n",
        "Every section and key of the configuration files, generated from their pydantic models"
        " (`src/mcp_approval/config.py` and, for the reference ARAP server, `src/mcp_approval/reference/config.py`)."
        " Paths are relative to the file. An unknown key, a wrong type or a value outside its bounds stops the"
        " command with the file and the field named.\n",
    ]
    undocumented: list[str] = []
    # A model shared by both files (e.g. [store]) is described once; later uses link to it.
    documented: dict[type[BaseModel], Section] = {}
    for module_name, title, prefix, command in FILES:
        if importlib.util.find_spec(module_name) is None:
            continue  # an optional file whose module does not exist in this tree
        module = importlib.import_module(module_name)
        root = _root_model(module)
        lines.append(f"## {title} {{ #{prefix or 'deployment-'}file }}\n")
        lines.append(" ".join(filter(None, [f"Read by `{command}`.", _doc(module, skip_first=True)])) + "\n")
        example = _literal_block(module.__doc__ or "")
        if example:
            lines.append("```toml\n" + example + "\n```\n")
        for section in sections(root, prefix):
            first = documented.setdefault(section.model, section)
            if first is not section:
                lines.append(f"### `{section.header}` {{ #{section.anchor} }}\n")
                lines.append(f"The same keys as [`{first.header}`](#{first.anchor}) above.\n")
                continue
            lines.extend(_section_lines(section, undocumented, title))
    return "\n".join(lines), undocumented


def _root_model(module: types.ModuleType) -> type[BaseModel]:
    """The model the module's public ``load_*`` function returns."""
    for name, function in inspect.getmembers(module, inspect.isfunction):
        if name.startswith("load_") and function.__module__ == module.__name__:
            returned = typing.get_type_hints(function).get("return")
            if isinstance(returned, type) and issubclass(returned, BaseModel):
                return returned
    raise DocsConfigError(f"{module.__name__}: no public load_* function returning a pydantic model")


def sections(root: type[BaseModel], prefix: str) -> Iterator[Section]:
    """The root's top-level keys (as ``(top level)``), then each table, depth first, in field order."""
    if any(_table_kind(field) is None for field in _fields(root).values()):
        yield Section("(top level)", root, f"{prefix}top-level")
    yield from _tables(root, "", prefix)


def _tables(model: type[BaseModel], path: str, prefix: str) -> Iterator[Section]:
    for key, field in _fields(model).items():
        kind = _table_kind(field)
        if kind is None:
            continue
        name, child = f"{path}{key}", kind[1]
        header = {"table": f"[{name}]", "array": f"[[{name}]]", "map": f"[{name}.NAME]"}[kind[0]]
        yield Section(header, child, prefix + name.replace(".", "-"), required=field.is_required())
        if kind[0] == "table":
            yield from _tables(child, f"{name}.", prefix)
        else:
            yield from _tables(child, f"{name}.{'NAME.' if kind[0] == 'map' else ''}", prefix)


def _fields(model: type[BaseModel]) -> dict[str, FieldInfo]:
    """TOML key → field, without fields excluded from the file (such as the file's own path)."""
    return {field.alias or name: field for name, field in model.model_fields.items() if field.exclude is not True}


def _table_kind(field: FieldInfo) -> tuple[str, type[BaseModel]] | None:
    """``("table" | "array" | "map", model)`` when the field is a TOML table, else ``None``.

    An optional table (``Section | None``) is a table too: the section may simply be left out.
    """
    annotation = _without_none(field.annotation)
    if _is_model(annotation):
        return "table", typing.cast(type[BaseModel], annotation)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is list and args and _is_model(args[0]):
        return "array", args[0]
    if origin is dict and len(args) == 2 and _is_model(args[1]):
        return "map", args[1]
    return None


def _without_none(annotation: Any) -> Any:
    """``X`` for ``X | None``; anything else unchanged."""
    if typing.get_origin(annotation) in (types.UnionType, typing.Union):
        members = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        if len(members) == 1:
            return members[0]
    return annotation


def _is_model(annotation: object) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _section_lines(section: Section, undocumented: list[str], file_title: str) -> list[str]:
    lines = [f"### `{section.header}` {{ #{section.anchor} }}\n"]
    description = _doc(section.model, skip_first=False)
    if description and section.header != "(top level)":
        lines.append(description + (" **Required.**" if section.required else "") + "\n")
    comments = field_comments(section.model)
    rows = ["| key | type | default | description |", "|---|---|---|---|"]
    for key, field in _fields(section.model).items():
        if _table_kind(field) is not None:
            continue
        name = next(n for n, f in section.model.model_fields.items() if f is field)
        text = field.description or comments.get(name, "")
        if not text:
            undocumented.append(f"{file_title}: {section.header} {key}")
        kind = ", ".join(part for part in (_type_name(field.annotation), _constraints(field)) if part)
        rows.append(f"| `{key}` | {kind} | {_default(field)} | {_cell(_rst(text)) or '—'} |")
    if len(rows) > 2:
        lines.append("\n".join(rows) + "\n")
    return lines


def field_comments(model: type[BaseModel]) -> dict[str, str]:
    """Field name → the ``#:`` comment lines directly above its declaration in the class body
    (or in the body of the model class it inherits the field from)."""
    found: dict[str, str] = {}
    for base in reversed(model.__mro__):
        if isinstance(base, type) and issubclass(base, BaseModel) and base.__module__ != "pydantic.main":
            found.update(_own_field_comments(base))
    return found


def _own_field_comments(model: type[BaseModel]) -> dict[str, str]:
    """The ``#:`` comments of the fields ``model``'s own class body declares."""
    try:
        source = textwrap.dedent(inspect.getsource(model))
    except (OSError, TypeError) as exc:
        raise DocsConfigError(f"{model.__qualname__}: source not readable ({exc})") from exc
    lines = source.splitlines()
    found: dict[str, str] = {}
    class_node = ast.parse(source).body[0]
    assert isinstance(class_node, ast.ClassDef)
    for node in class_node.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            comment: list[str] = []
            index = node.lineno - 2
            while index >= 0 and lines[index].strip().startswith("#:"):
                comment.insert(0, lines[index].strip()[2:].strip())
                index -= 1
            if comment:
                found[node.target.id] = " ".join(comment)
    return found


def _type_name(annotation: Any) -> str:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Literal:
        return " or ".join(f'`"{value}"`' if isinstance(value, str) else f"`{value}`" for value in args)
    if origin in (types.UnionType, typing.Union):
        names = [_type_name(arg) for arg in args if arg is not type(None)]
        return " or ".join(names)
    if origin in (list, tuple, frozenset):
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        return "table" if not args or args[1] is Any else f"table of {_type_name(args[1])}"
    return _SCALARS.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "**required**"
    factory: Callable[[], Any] | None = typing.cast("Callable[[], Any] | None", field.default_factory)
    value = factory() if factory is not None else field.default
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f'`"{value}"`'
    if isinstance(value, tuple | frozenset | set):
        value = sorted(value)  # TOML writes every sequence as an array
    if isinstance(value, list | dict):
        return f"`{value!r}`".replace("'", '"')
    return f"`{value}`"


def _constraints(field: FieldInfo) -> str:
    words = {
        annotated_types.Gt: ("gt", "> {}"),
        annotated_types.Ge: ("ge", "≥ {}"),
        annotated_types.Lt: ("lt", "< {}"),
        annotated_types.Le: ("le", "≤ {}"),
        annotated_types.MinLen: ("min_length", "length ≥ {}"),
        annotated_types.MaxLen: ("max_length", "length ≤ {}"),
    }
    parts = []
    for item in field.metadata:
        for kind, (attribute, template) in words.items():
            if isinstance(item, kind):
                parts.append(template.format(getattr(item, attribute)))
    return ", ".join(parts)


def _doc(obj: object, *, skip_first: bool) -> str:
    """A docstring as Markdown: RST literals become code spans; the ``[section]``: lead-in is dropped."""
    text, literal, _ = (inspect.getdoc(obj) or "").partition("::")
    text += "." if literal else ""
    paragraphs = [_rst(" ".join(p.split())) for p in text.split("\n\n") if p.strip()]
    if skip_first:
        paragraphs = paragraphs[1:]
    result = "\n\n".join(paragraphs)
    if result.startswith("`[") and "`: " in result:
        lead_out = result.split("`: ", 1)[1]
        result = lead_out[:1].upper() + lead_out[1:]
    return result


def _literal_block(doc: str) -> str:
    """The indented literal block after the first ``::`` of a docstring."""
    if "::" not in doc:
        return ""
    block: list[str] = []
    for line in doc.split("::", 1)[1].splitlines()[1:]:
        if line.strip() and not line.startswith(" "):
            break
        block.append(line)
    return textwrap.dedent("\n".join(block)).strip("\n")


def _rst(text: str) -> str:
    """RST inline literals and roles (``:class:`X```) as Markdown code spans."""
    return _ROLE.sub(r"`\1`", text.replace("``", "`"))


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")
