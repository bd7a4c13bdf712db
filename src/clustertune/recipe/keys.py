"""Every recipe key with its type, default and doc, read from the schema models.

``clustertune schema`` prints these, ``clustertune validate --explain`` pairs them with a
recipe's values, and ``recipe_json_schema()`` is the JSON Schema editors read. Nothing here is
written by hand: the field annotations, defaults and attribute docstrings are the source.
"""

from __future__ import annotations

import difflib
import types
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic_core import PydanticUndefined, to_jsonable_python

from clustertune.errors import UnknownKey
from clustertune.recipe.schema import Recipe
from clustertune.recipe.trainer_names import trainer_hint


@dataclass(frozen=True)
class KeyDoc:
    """One recipe key: ``train.lr``; a section (``train``, ``model.adapter``) has ``section`` set."""

    key: str
    type: str
    default: Any
    doc: str
    section: bool = False
    required: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "type": self.type, "default": self.default, "doc": self.doc,
                "section": self.section, "required": self.required}


def _model_in(ann: Any) -> type[BaseModel] | None:
    """The schema model inside an annotation (``X``, ``X | None``, ``list[X]``), if any."""
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return ann
    return next((m for a in get_args(ann) if (m := _model_in(a)) is not None), None)


def type_name(ann: Any) -> str:
    """An annotation as users read it: ``int | null``, ``one of linear, cosine, constant``."""
    origin = get_origin(ann)
    if ann is type(None):
        return "null"
    if origin is Literal:
        return "one of " + ", ".join(str(a) for a in get_args(ann))
    if origin in (Union, types.UnionType):
        return " | ".join(type_name(a) for a in get_args(ann))
    if origin is list:
        return f"list[{', '.join(type_name(a) for a in get_args(ann))}]"
    if origin is dict:
        return "mapping"
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return "section"
    if ann is Any:
        return "any"
    return getattr(ann, "__name__", str(ann))


def _bounds(metadata: list[Any]) -> str:
    marks = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
    parts = [f"{sign} {getattr(m, attr)}" for m in metadata for attr, sign in marks.items() if hasattr(m, attr)]
    return ", ".join(parts)


def _default(field: Any) -> Any:
    if field.default_factory is not None:
        value = field.default_factory()
    elif field.default is PydanticUndefined:
        return None
    else:
        value = field.default
    return to_jsonable_python(value)


def _walk(model: type[BaseModel], prefix: str, out: list[KeyDoc]) -> None:
    for name, field in model.model_fields.items():
        key = f"{prefix}{name}"
        doc = " ".join((field.description or "").split()).replace("``", "`")
        sub = _model_in(field.annotation)
        if sub is not None:
            repeated = get_origin(field.annotation) is list
            out.append(KeyDoc(key, "list of sections" if repeated else (
                "section | null" if type(None) in get_args(field.annotation) else "section"),
                [] if repeated else None, doc, section=True))
            _walk(sub, f"{key}[]." if repeated else f"{key}.", out)
            continue
        bounds = _bounds(field.metadata)
        out.append(KeyDoc(key, type_name(field.annotation) + (f" ({bounds})" if bounds else ""), _default(field), doc,
                          required=field.is_required()))


def all_keys() -> list[KeyDoc]:
    """Every key of the recipe schema, sections before their keys, in schema order."""
    out: list[KeyDoc] = []
    _walk(Recipe, "", out)
    return out


def keys_under(key: str) -> list[KeyDoc]:
    """The key itself and, for a section, every key below it. An unknown key raises
    :class:`UnknownKey` with the closest keys (and the clustertune name of a Trainer argument)."""
    key = key.strip().removesuffix(".")
    docs = all_keys()
    found = [d for d in docs if d.key == key or d.key.startswith(f"{key}.") or d.key.startswith(f"{key}[].")]
    if found:
        return found
    leaf = key.rsplit(".", 1)[-1]
    hint = trainer_hint(leaf, fuzzy=True)
    if hint is None:
        leaves = {d.key.rsplit(".", 1)[-1] for d in docs}
        close = difflib.get_close_matches(key, [d.key for d in docs], n=3, cutoff=0.75) or [
            d.key for d in docs if d.key.rsplit(".", 1)[-1] in difflib.get_close_matches(leaf, leaves, n=2, cutoff=0.75)][:3]
        hint = f"did you mean {' or '.join(repr(c) for c in close)}?" if close else None
    sections = ", ".join(d.key for d in docs if d.section and "." not in d.key)
    raise UnknownKey(f"no recipe key {key!r}" + (f"; {hint}" if hint else "")
                     + f" (`clustertune schema` lists every key; sections: {sections})")


def explain(recipe: Recipe) -> list[tuple[KeyDoc, Any]]:
    """The keys a recipe sets to something other than the default, with their values."""
    plain = recipe.to_plain()
    out = []
    for d in all_keys():
        if d.section or "[]" in d.key:
            continue
        node: Any = plain
        for part in d.key.split("."):
            node = node.get(part, PydanticUndefined) if isinstance(node, dict) else PydanticUndefined
        if node is not PydanticUndefined and node != d.default:
            out.append((d, node))
    return out


def _tidy(node: Any) -> Any:
    """Descriptions on one line with single backticks, as editors show them."""
    if isinstance(node, dict):
        return {k: " ".join(v.split()).replace("``", "`") if k == "description" and isinstance(v, str) else _tidy(v)
                for k, v in node.items()}
    if isinstance(node, list):
        return [_tidy(v) for v in node]
    return node


def recipe_json_schema() -> dict[str, Any]:
    """A JSON Schema of recipe files, for editors (the YAML language server): the recipe model's
    own schema with every field's doc as its description."""
    schema = _tidy(Recipe.model_json_schema(mode="validation"))
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "clustertune recipe", **{k: v for k, v in schema.items() if k != "title"}}
