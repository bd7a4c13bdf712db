"""A sweep's space, written as Hydra's multirun writes it, and the trials it makes.

Each ``key=value`` on a sweep's command line is one of:

- a fixed override (``train.max_steps=20``), applied to every trial;
- a list: ``train.lr=1e-4,3e-4,1e-3`` or ``choice(1e-4,3e-4)``. Commas inside quotes, brackets
  or braces do not split (``data.text_column='a,b'`` is one value, as is ``x=[1,2]``);
- ``range(start, stop[, step])``: Hydra's range, ``stop`` left out (``range(1,4)`` is 1, 2, 3);
- ``range(start, stop, num=N[, log])``: N values from ``start`` to ``stop`` inclusive, evenly
  spaced, or evenly on a log scale with ``log``;
- ``interval(low, high[, log])``: any value between the two; only a random or searched sweep
  can draw from it (a grid has no finite set of values to walk).

Every problem in the space is reported at once, naming the key and its value; nothing here reads
a recipe (:mod:`clustertune.api.sweeps` checks each trial's recipe as ``run`` would).
"""

from __future__ import annotations

import itertools
import math
import random
import re
from dataclasses import dataclass

from clustertune.errors import Problem, RecipeError

WHERE = "<sweep>"
_CALL = re.compile(r"^\s*(range|choice|interval)\((.*)\)\s*$", re.S)


@dataclass(frozen=True)
class Interval:
    low: float
    high: float
    log: bool = False

    def draw(self, rng: random.Random) -> float:
        if self.log:
            return math.exp(rng.uniform(math.log(self.low), math.log(self.high)))
        return rng.uniform(self.low, self.high)


@dataclass(frozen=True)
class Axis:
    """One swept key: its values as override text (each one a YAML scalar, as ``run`` reads it),
    or an interval to draw from."""

    key: str
    values: tuple[str, ...] = ()
    interval: Interval | None = None

    @property
    def discrete(self) -> bool:
        return self.interval is None


@dataclass(frozen=True)
class Space:
    fixed: tuple[str, ...]  # key=value overrides every trial gets
    axes: tuple[Axis, ...]

    @property
    def grid_size(self) -> int | None:
        """How many trials the grid has; None where an axis is an interval."""
        if not all(a.discrete for a in self.axes):
            return None
        return math.prod(len(a.values) for a in self.axes)

    def keys(self) -> list[str]:
        return [a.key for a in self.axes]


def split_top_level(text: str) -> list[str]:
    """``text`` split on commas outside quotes, brackets, braces and parentheses."""
    parts, depth, quote, cur = [], 0, "", []
    for ch in text:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = ""
            continue
        if ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    parts.append("".join(cur).strip())
    return parts


def _number(text: str) -> int | float:
    t = text.strip()
    try:
        return int(t)
    except ValueError:
        return float(t)  # ValueError names the text


def _range(key: str, args: list[str]) -> tuple[str, ...]:
    named = [a for a in args if "=" in a or a == "log"]
    plain = [a for a in args if a not in named]
    opts = {a.partition("=")[0].strip(): a.partition("=")[2].strip() for a in named if "=" in a}
    log = "log" in named
    unknown = set(opts) - {"num", "step"}
    if unknown:
        raise ValueError(f"range() takes start, stop and step or num=N (and log), not {', '.join(sorted(unknown))}")
    if len(plain) not in (2, 3) or (len(plain) == 3 and "num" in opts):
        raise ValueError("range() takes start, stop and one of step or num=N, e.g. range(1,4) or range(1e-4,1e-3,num=4,log)")
    start, stop = _number(plain[0]), _number(plain[1])
    if "num" in opts:
        num = int(opts["num"])
        if num < 1:
            raise ValueError(f"num={num}: a range needs at least one value")
        if log and (start <= 0 or stop <= 0):
            raise ValueError("a log range needs start and stop above 0")
        if num == 1:
            return (repr(start),)
        if log:
            a, b = math.log(start), math.log(stop)
            vals: list[int | float] = [math.exp(a + (b - a) * i / (num - 1)) for i in range(num)]
        else:
            vals = [start + (stop - start) * i / (num - 1) for i in range(num)]
        # 12 significant digits: the ends as written, no float noise in the overrides people read.
        vals = [float(f"{v:.12g}") for v in vals]
        if not log and isinstance(start, int) and isinstance(stop, int) and all(v.is_integer() for v in vals):
            vals = [int(v) for v in vals]
        return tuple(repr(v) for v in vals)
    if log:
        raise ValueError("log goes with num=N: range(1e-4,1e-3,num=4,log)")
    step = _number(plain[2]) if len(plain) == 3 else _number(opts.get("step", "1"))
    if step == 0:
        raise ValueError("step 0 never reaches stop")
    count = math.ceil((stop - start) / step)
    if count <= 0:
        raise ValueError(f"range({plain[0]}, {plain[1]}) with step {step} is empty (stop is left out, as in Python)")
    if count > 100_000:
        raise ValueError(f"{count} values: too many for one sweep")
    if isinstance(start, int) and isinstance(step, int):
        return tuple(repr(start + i * step) for i in range(count))
    return tuple(repr(float(f"{start + i * step:.12g}")) for i in range(count))


def parse_value(key: str, raw: str) -> Axis | None:
    """The axis ``key=raw`` sweeps, or None when ``raw`` is one fixed value. ValueError says why
    the value is not a sweep it can read."""
    m = _CALL.match(raw)
    if m:
        fn, args = m.group(1), split_top_level(m.group(2))
        if fn == "choice":
            if not any(args):
                raise ValueError("choice() needs at least one value")
            if not all(args):
                raise ValueError("an empty value in choice(); quote an empty string as ''")
            return Axis(key, tuple(args))
        if fn == "range":
            return Axis(key, _range(key, args))
        log = "log" in args
        plain = [a for a in args if a != "log"]
        if len(plain) != 2:
            raise ValueError("interval() takes low and high (and log), e.g. interval(1e-5,1e-3,log)")
        low, high = float(_number(plain[0])), float(_number(plain[1]))
        if not low < high:
            raise ValueError(f"interval({plain[0]}, {plain[1]}) is empty: low must be below high")
        if log and low <= 0:
            raise ValueError("a log interval needs low above 0")
        return Axis(key, interval=Interval(low, high, log))
    parts = split_top_level(raw)
    if len(parts) == 1:
        return None
    if not all(parts):
        raise ValueError("an empty value in the list (two commas, or one at an end); quote an empty string as ''")
    return Axis(key, tuple(parts))


def parse_space(args: list[str]) -> Space:
    """The space of ``args`` (``key=value`` each), every problem at once as one RecipeError."""
    fixed: list[str] = []
    axes: list[Axis] = []
    problems: list[Problem] = []
    seen: set[str] = set()
    for arg in args:
        key, eq, raw = arg.partition("=")
        key = key.strip()
        if not eq or not key:
            problems.append(Problem(key=arg, file=WHERE, message="must look like key=value or key=a,b,c",
                                    hint="e.g. train.lr=1e-4,3e-4"))
            continue
        if key in seen:
            problems.append(Problem(key=key, file=WHERE, message="is given twice; give its values once, as one list"))
            continue
        seen.add(key)
        try:
            axis = parse_value(key, raw)
        except ValueError as exc:
            problems.append(Problem(key=key, file=WHERE, message=f"{raw!r}: {exc}"))
            continue
        if axis is None:
            fixed.append(f"{key}={raw}")
        else:
            axes.append(axis)
    if problems:
        raise RecipeError(problems)
    return Space(tuple(fixed), tuple(axes))


def grid(space: Space) -> list[dict[str, str]]:
    """Every combination, the last key changing fastest (as Hydra orders a multirun)."""
    intervals = [a.key for a in space.axes if not a.discrete]
    if intervals:
        raise RecipeError([Problem(key=k, file=WHERE, message="is an interval, which a grid cannot walk",
                                   hint="use --random N or --search optuna, or give a list or a range(...)")
                           for k in intervals])
    keys = space.keys()
    return [dict(zip(keys, combo)) for combo in itertools.product(*(a.values for a in space.axes))]


def random_trials(space: Space, n: int, seed: int = 0) -> list[dict[str, str]]:
    """``n`` trials drawn from the space: distinct grid points where every axis is a list, else
    each key drawn on its own (a list's value uniformly, an interval's uniformly or log-uniformly)."""
    if n < 1:
        raise RecipeError([Problem(key="--random", file=WHERE, message=f"{n}: a random sweep needs at least 1 trial")])
    rng = random.Random(seed)
    size = space.grid_size
    if size is not None:
        if n > size:
            raise RecipeError([Problem(key="--random", file=WHERE,
                                       message=f"{n} trials asked of a space with {size} combinations",
                                       hint="ask for fewer, or use --grid for all of them")])
        return [grid(space)[i] for i in sorted(rng.sample(range(size), n))]
    out = []
    for _ in range(n):
        out.append({a.key: (rng.choice(a.values) if a.interval is None else repr(float(f"{a.interval.draw(rng):.6g}")))
                    for a in space.axes})
    return out


def trial_overrides(space: Space, trial: dict[str, str]) -> list[str]:
    """The overrides one trial runs with: the fixed ones, then its own values."""
    return [*space.fixed, *(f"{k}={v}" for k, v in trial.items())]
