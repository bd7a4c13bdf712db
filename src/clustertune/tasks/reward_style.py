"""How a user's reward function is called: TRL's way or TRLX's, read from its signature.

TRL calls ``fn(prompts=[...], completions=[...], **kwargs)``. TRLX calls
``reward_fn(samples=[...], prompts=[...], outputs=[...], **kwargs)``, each sample being the prompt
followed by its completion, so a function ported from a TRLX script (``def reward_fn(samples,
**kwargs)``) runs unchanged. The style is decided once, when the function is loaded (``validate``
and the preflight do it), so a signature that fits neither is the user's error naming the
function and both shapes, before any run exists, not a TypeError in the middle of a step.

Kept free of torch and TRL: ``validate`` imports it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from clustertune.errors import RewardError
from clustertune.runs.user_code import import_function

# The keyword arguments clustertune fills in itself (TRL's and TRLX's); a recipe's kwargs cannot name them.
_PASSED = ("prompts", "completions", "samples", "outputs")


@dataclass(frozen=True)
class RewardCall:
    """A reward function with the calling style its signature asked for."""

    fn: Callable[..., Any]
    style: Literal["trl", "trlx"]
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    trlx_extras: tuple[str, ...] = ()  # which of TRLX's ``prompts`` / ``outputs`` the function takes

    def __call__(self, prompts: Sequence[str], completions: Sequence[str]) -> Any:
        if self.style == "trl":
            return self.fn(prompts=list(prompts), completions=list(completions), **self.kwargs)
        given = {"prompts": list(prompts), "outputs": list(completions)}
        samples = [p + c for p, c in zip(prompts, completions)]
        return self.fn(samples=samples, **{k: given[k] for k in self.trlx_extras}, **self.kwargs)


def _takes(params: Mapping[str, inspect.Parameter], name: str) -> bool:
    p = params.get(name)
    if p is not None:
        return p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    return any(q.kind is q.VAR_KEYWORD for q in params.values())


def _bind_problem(sig: inspect.Signature, names: Sequence[str]) -> str | None:
    """Why calling with these keyword arguments would fail (inspect's words), or None."""
    try:
        sig.bind(**dict.fromkeys(names))
    except TypeError as exc:
        return str(exc)
    return None


def reward_call(fn: Callable[..., Any], spec: str, kwargs: Mapping[str, Any], key: str) -> RewardCall:
    """``fn`` with its calling style: TRL's when ``fn(prompts=, completions=, **kwargs)`` binds,
    else TRLX's when it has ``samples``; RewardError (naming ``key``, the function and the fix)
    when neither fits."""
    clash = [k for k in kwargs if k in _PASSED]
    if clash:
        raise RewardError(f"{key.rsplit('.', 1)[0]}.kwargs: {', '.join(clash)} is passed by clustertune itself "
                          f"({', '.join(_PASSED[:2])} to TRL-style functions, samples, prompts and outputs to TRLX-style "
                          "ones); remove it from the reward's kwargs")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin or C function without a readable signature: TRL's way
        return RewardCall(fn, "trl", dict(kwargs))
    params = sig.parameters
    trl_problem = _bind_problem(sig, ["prompts", "completions", *kwargs])
    if trl_problem is None:
        return RewardCall(fn, "trl", dict(kwargs))
    extras = tuple(n for n in ("prompts", "outputs") if _takes(params, n))
    trlx_problem = _bind_problem(sig, ["samples", *extras, *kwargs]) if "samples" in params else None
    if "samples" in params and trlx_problem is None:
        return RewardCall(fn, "trlx", dict(kwargs), extras)
    name = getattr(fn, "__name__", spec.rsplit(":", 1)[-1])
    why = f"TRLX's call would fail: {trlx_problem}" if "samples" in params else f"TRL's call would fail: {trl_problem}"
    hint = (f"; the recipe's kwargs ({', '.join(kwargs)}) are passed too, so accept them (or **kwargs) or remove them "
            f"from {key.rsplit('.', 1)[0]}.kwargs" if kwargs else "")
    raise RewardError(
        f"{key}: reward function {spec}{sig} fits neither calling style ({why}){hint}. Define it the TRL way, "
        f"`def {name}(prompts, completions, **kwargs)` returning one float per completion, or the TRLX way, "
        f"`def {name}(samples, **kwargs)` where each sample is the prompt followed by its completion "
        "(prompts and outputs are passed too when it takes them)")


def load_reward(spec: str, kwargs: Mapping[str, Any], key: str) -> RewardCall:
    """``module:attr`` imported and its calling style checked (``validate`` and the preflight)."""
    return reward_call(import_function(spec, key, "reward function", RewardError), spec, kwargs, key)
