"""Load a recipe: YAML file or shipped name, plus ``key=value`` overrides, into a frozen Recipe.

All problems are collected and raised together as one :class:`RecipeError` naming the file,
the key path, the line where the file has one, and a did-you-mean for misspelt keys.
"""

from __future__ import annotations

import copy
import difflib
import os
import re
from pathlib import Path
from typing import Any, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from clustertune.errors import Problem, RecipeError, RecipeNotFound
from clustertune.recipe.model_schema import config_overrides_from_text
from clustertune.recipe.schema import Recipe
from clustertune.recipe.trainer_names import trainer_hint

# PyYAML follows YAML 1.1, where "3e-4" is a string. Users write it as a float, so accept
# exponent forms without a dot as floats too.
_FLOAT_RE = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
    |\.[0-9_]+(?:[eE][-+][0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)


class _Loader(yaml.SafeLoader):
    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        # A key given twice would silently keep the last value: refuse it, naming the line.
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while reading a mapping", node.start_mark,
                    f"key {key!r} appears twice (first on line {seen[key].line + 1}); keep one", key_node.start_mark)
            seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


# YAML 1.1 also reads "1:00:00" as the base-60 integer 3600, which turns a SLURM time limit
# (launch.time: 1:00:00) into a number; integers here are YAML 1.2's, without base 60.
_INT_RE = re.compile(r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+)$")

_Loader.yaml_implicit_resolvers = copy.deepcopy(yaml.SafeLoader.yaml_implicit_resolvers)
for _ch in list("-+0123456789."):
    _Loader.yaml_implicit_resolvers[_ch] = [
        (tag, rx) for tag, rx in _Loader.yaml_implicit_resolvers.get(_ch, [])
        if tag not in ("tag:yaml.org,2002:float", "tag:yaml.org,2002:int")
    ]
    _Loader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_RE, [_ch])
    if _ch != ".":
        _Loader.add_implicit_resolver("tag:yaml.org,2002:int", _INT_RE, [_ch])


def recipes_dir() -> Path:
    """Directory of the shipped recipes (source checkout or installed wheel)."""
    here = Path(__file__).resolve().parent.parent
    for candidate in (here.parent.parent / "recipes", here / "_recipes"):
        if candidate.is_dir():
            return candidate
    return here.parent.parent / "recipes"


def shipped_recipes() -> dict[str, Path]:
    """Shipped recipe names -> files."""
    d = recipes_dir()
    return {p.stem: p for p in sorted(d.glob("*.yaml"))} if d.is_dir() else {}


def shipped_recipe(name: str) -> Path:
    """The file of a shipped recipe (``quickstart`` or ``quickstart.yaml``); else RecipeNotFound."""
    shipped = shipped_recipes()
    key = name.removesuffix(".yaml").removesuffix(".yml")
    if key in shipped:
        return shipped[key]
    close = difflib.get_close_matches(key, list(shipped), n=1)
    hint = f" Did you mean '{close[0]}'?" if close else ""
    raise RecipeNotFound(f"no shipped recipe named {name!r}.{hint} Shipped recipes: {', '.join(shipped) or '(none found)'}.")


def resolve_recipe_path(name_or_path: str | os.PathLike[str]) -> Path:
    """A file path as given, else a shipped recipe of that name; else RecipeNotFound."""
    p = Path(name_or_path).expanduser()
    if p.is_file():
        return p
    shipped = shipped_recipes()
    key = str(name_or_path)
    if key in shipped:
        return shipped[key]
    if key.endswith((".yaml", ".yml")) and key[:-5].rstrip(".") in shipped:
        return shipped[key.rsplit(".", 1)[0]]
    names = ", ".join(shipped) or "(none found)"
    close = difflib.get_close_matches(key, list(shipped), n=1)
    hint = f" Did you mean '{close[0]}'?" if close else ""
    if p.is_dir():
        raise RecipeNotFound(f"recipe {key!r} is a directory, not a YAML file. Shipped recipes: {names}.")
    if p.exists():  # a device, a pipe, a socket
        raise RecipeNotFound(f"recipe {key!r} is not a regular file; give a YAML file (or a shipped name: {names}).")
    raise RecipeNotFound(f"no recipe file or shipped recipe named {key!r}.{hint} Shipped recipes: {names}.")


def key_lines(text: str) -> dict[tuple[str, ...], int]:
    """Key path -> 1-based line of that key in the YAML text (best effort)."""
    lines: dict[tuple[str, ...], int] = {}
    try:
        root = yaml.compose(text, Loader=_Loader)
    except yaml.YAMLError:
        return lines

    def walk(node: Any, path: tuple[str, ...]) -> None:
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                key = path + (str(k.value),)
                lines[key] = k.start_mark.line + 1
                walk(v, key)

    walk(root, ())
    return lines


def parse_scalar(text: str) -> Any:
    """An override value: YAML scalar/flow syntax (``3e-4``, ``true``, ``[a, b]``, ``null``)."""
    try:
        return yaml.load(text, Loader=_Loader) if text.strip() else ""
    except yaml.YAMLError:
        return text


# Mappings that also take a one-line text form (run_clm's --config_overrides).
_TEXT_MAPPINGS = {("model", "config_overrides"): config_overrides_from_text}


def apply_overrides(data: dict[str, Any], overrides: list[str], problems: list[Problem]) -> dict[str, Any]:
    """Apply ``a.b.c=value`` overrides to a nested dict (a copy); bad ones become Problems."""
    out = copy.deepcopy(data)
    for ov in overrides:
        if "=" not in ov:
            problems.append(
                Problem(key=ov, message="override must look like key=value", file="<command line>",
                        hint="e.g. train.lr=3e-4")
            )
            continue
        key, _, raw = ov.partition("=")
        parts = key.strip().split(".")
        if not all(parts):
            problems.append(Problem(key=key, message="empty part in dotted key", file="<command line>"))
            continue
        node = out
        for i, part in enumerate(parts[:-1]):
            nxt = node.get(part)
            if nxt is None:
                nxt = node[part] = {}
            if not isinstance(nxt, dict):
                problems.append(
                    Problem(key=".".join(parts[: i + 1]), file="<command line>",
                            message=f"is a value ({nxt!r}), so {key} cannot be set below it")
                )
                break
            node = nxt
        else:
            value = parse_scalar(raw)
            if isinstance(value, str) and isinstance(node.get(parts[-1]), dict) and tuple(parts) in _TEXT_MAPPINGS:
                try:  # run_clm's "n_embd=128,n_head=4" adds to the recipe's mapping, as {n_embd: 128} would
                    value = _TEXT_MAPPINGS[tuple(parts)](value)
                except ValueError as exc:
                    problems.append(Problem(key=key.strip(), message=str(exc), file="<command line>"))
                    continue
            if isinstance(value, dict) and isinstance(node.get(parts[-1]), dict):
                # train={lr: 1} sets those keys; it does not drop the section's others.
                node[parts[-1]] = {**node[parts[-1]], **value}
            else:
                node[parts[-1]] = value
    return out


def _fields_at(loc: tuple[Any, ...]) -> list[str]:
    """Field names of the schema model found by following ``loc`` from Recipe."""
    model: Any = Recipe
    for part in loc:
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return []
        field = model.model_fields.get(str(part))
        if field is None:
            return []
        ann = field.annotation
        if get_origin(ann) is not None:
            ann = next((a for a in get_args(ann) if isinstance(a, type) and issubclass(a, BaseModel)), None)
        model = ann
    if isinstance(model, type) and issubclass(model, BaseModel):
        return list(model.model_fields)
    return []


def _problems_from_validation(
    err: ValidationError, file: str, lines: dict[tuple[str, ...], int], overridden: dict[tuple[str, ...], str]
) -> list[Problem]:
    problems = []
    for e in err.errors():
        loc = tuple(str(p) for p in e["loc"])
        key = ".".join(loc)
        line = lines.get(loc)
        src = next((ov for k, ov in overridden.items() if loc[: len(k)] == k), None)
        where = file
        if src is not None:  # the bad value came from the command line, not the file
            where, line = f"<override {src}>", None
        if e["type"] == "extra_forbidden":
            known = _fields_at(loc[:-1])
            close = difflib.get_close_matches(loc[-1], known, n=1, cutoff=0.6)
            hint = trainer_hint(loc[-1]) or (f"did you mean '{'.'.join(loc[:-1] + (close[0],))}'?" if close else (
                f"known keys here: {', '.join(known)}" if known else None))
            problems.append(Problem(key=key, message="unknown key", file=where, line=line, hint=hint))
        elif e["type"] == "value_error" and not loc:
            # Cross-field checks from Recipe._cross_field: one "key: message" per line.
            text = str(e["msg"]).removeprefix("Value error, ")
            for item in text.splitlines():
                k, _, msg = item.partition(": ")
                parts = tuple(k.split("."))
                by = next((ov for o, ov in overridden.items() if parts[: len(o)] == o), None)
                problems.append(Problem(key=k, message=msg, file=f"<override {by}>" if by else where,
                                        line=None if by else lines.get(parts)))
        else:
            got = e.get("input")
            msg = e["msg"]
            if not isinstance(got, dict) and got is not None:
                msg += f", got {got!r}"
            problems.append(Problem(key=key, message=msg, file=where, line=line))
    return problems


def _cross_field_behind(data: dict[str, Any], err: ValidationError, found: list[Problem], file: str,
                        lines: dict[tuple[str, ...], int], overridden: dict[tuple[str, ...], str]) -> list[Problem]:
    """The cross-field problems that field errors hid (pydantic runs a model's own checks only
    once its fields are valid): the recipe again without the values that failed, and whatever
    its cross-field checks then say about other keys. A NaN weight is reported together with
    the reward that sets both function and model, not one per attempt."""
    trimmed = copy.deepcopy(data)
    for e in err.errors():
        loc = e["loc"]
        if not loc:
            return []  # the cross-field checks already ran
        parent: Any = trimmed
        for part in loc[:-1]:
            try:
                parent = parent[part]
            except (KeyError, IndexError, TypeError):
                parent = None
                break
        if isinstance(parent, dict):
            parent.pop(loc[-1], None)
        else:
            return []  # a bad item in a list: dropping it would shift the keys of those after it
    try:
        Recipe.model_validate(trimmed)
    except ValidationError as again:
        seen = [p.key for p in found]
        behind = [p for p in _problems_from_validation(again, file, lines, overridden)
                  if not any(p.key == k or p.key.startswith(k + ".") or k in p.message for k in seen)]
        # Only what the cross-field checks add about other keys: a field missing now is one that
        # was dropped, and a check that names a dropped key may be about its absence.
        return [p for p in behind if not p.message.startswith("Field required")]
    return []


def _without(data: dict[str, Any], keys: list[str], tries: int = 3) -> Recipe | None:
    """The recipe without the values at ``keys`` (and at the keys their absence then makes
    wrong), when what is left validates: the checks that need a whole recipe (the preflight)
    can then report their problems beside these. None when no such recipe is left."""
    trimmed = copy.deepcopy(data)
    for _ in range(tries):
        dropped = False
        for key in keys:
            parts = key.split(".")
            parent: Any = trimmed
            for part in parts[:-1]:
                parent = parent.get(part) if isinstance(parent, dict) else None
            if isinstance(parent, dict) and parts[-1] in parent:
                del parent[parts[-1]]
                dropped = True
        if not dropped:
            return None
        try:
            return Recipe.model_validate(trimmed)
        except ValidationError as err:
            keys = [p.key for p in _problems_from_validation(err, "", {}, {})]
    return None


def load_recipe(source: str | os.PathLike[str] | dict[str, Any], overrides: list[str] | None = None) -> Recipe:
    """Load and validate a recipe.

    ``source`` is a YAML path, the name of a shipped recipe (``quickstart``), or a dict.
    ``overrides`` are ``dotted.key=value`` strings applied on top. Raises RecipeError with
    every problem found, or RecipeNotFound.
    """
    overrides = list(overrides or [])
    lines: dict[tuple[str, ...], int] = {}
    if isinstance(source, dict):
        file, data = "<dict>", copy.deepcopy(source)
    else:
        path = resolve_recipe_path(source)
        file = str(path)
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise RecipeError([Problem(key="", file=file, message=f"is not a UTF-8 text file ({exc.reason} at byte "
                                                                   f"{exc.start}); a recipe is a YAML file")]) from None
        except OSError as exc:
            raise RecipeError([Problem(key="", file=file, message=f"cannot be read ({exc.strerror})")]) from None
        try:
            data = yaml.load(text, Loader=_Loader)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown position"
            problem = getattr(exc, "problem", None) or str(exc)
            raise RecipeError([Problem(key="", file=file, line=mark.line + 1 if mark else None,
                                       message=f"malformed YAML at {where}: {problem}")]) from exc
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise RecipeError([Problem(key="", file=file, message=f"a recipe is a mapping of sections, got {type(data).__name__}")])
        lines = key_lines(text)
        data.setdefault("name", path.stem)
    problems: list[Problem] = []
    data = apply_overrides(data, overrides, problems)
    try:
        recipe = Recipe.model_validate(data)
    except ValidationError as err:
        overridden = {tuple(o.partition("=")[0].strip().split(".")): o for o in overrides if "=" in o}
        found = _problems_from_validation(err, file, lines, overridden)
        problems.extend(found + _cross_field_behind(data, err, found, file, lines, overridden))
        error = RecipeError(problems)
        error.partial = _without(data, [p.key for p in problems])
        raise error from None
    if problems:
        raise RecipeError(problems)
    return recipe


def dump_recipe(recipe: Recipe) -> str:
    """The resolved recipe as YAML text (sections in schema order)."""
    return yaml.safe_dump(recipe.to_plain(), sort_keys=False, default_flow_style=False)
