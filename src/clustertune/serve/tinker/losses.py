"""The losses the Tinker SDK names, as its documentation defines them.

Each is a *sum* over the tokens of one datum (the SDK reports ``loss:sum``), not clustertune's
mean over trained tokens: a loop that wants a mean passes weights that sum to one. ``logprobs``
are the model's log-probabilities of ``target_tokens`` under the weights being trained.

- ``cross_entropy``: ``-sum(weights * logprobs)``.
- ``importance_sampling``: ``-sum(exp(logprobs - sampling_logprobs) * advantages)``, the
  policy gradient of samples drawn by another (older) sampler, reweighted by the ratio.
- ``ppo``: the same ratio clipped to ``[clip_low_threshold, clip_high_threshold]`` (0.8 and 1.2
  unless ``loss_fn_config`` says otherwise), the pessimistic minimum of the two terms.
- ``cispo``: ``-sum(sg(clip(ratio, clip_low_threshold, clip_high_threshold)) * logprobs *
  advantages)``: the clipped ratio is a coefficient with no gradient of its own, so every token
  keeps a gradient through its log-probability (Tinker's documentation, "Loss Functions: CISPO";
  its default is the one-sided clip 0.0 and 4.0).
- ``dro``: ``-sum(logprobs * advantages - beta / 2 * (logprobs - sampling_logprobs) ** 2)``, a
  quadratic penalty on moving away from the sampler (Tinker's documentation, "Loss Functions: DRO").
  The documentation gives no default ``beta``, so this server asks for one in ``loss_fn_config``.
- ``gspo`` (GSPO-token, Tinker's documentation, "Loss Functions: GSPO"): the sequence's ratio is
  the geometric mean of the token ratios over the tokens ``sequence_ratio_mask`` marks; every token
  carries that value with its own log-probability's gradient, and the ppo objective is taken with
  it, clipped to ``[clip_low_threshold, clip_high_threshold]``. The page gives no default bounds
  (GSPO's paper clips far tighter than PPO), so this server asks for both in ``loss_fn_config``.

The SDK knows more; a request for one of these is refused with a message naming it, as for any
name the SDK does not know. ``stable_reinforce`` (alpha in Tinker): its documentation says it
uses what the sampler records (``record_stability_info``, a ``sequence_id`` per sample) but not
the objective computed from it. Server-side ``custom``: the SDK's ``forward_backward_custom``
runs a custom loss on the client, over ``cross_entropy``.
"""

from __future__ import annotations

import math
from typing import Any

SUPPORTED = ("cross_entropy", "importance_sampling", "ppo", "cispo", "dro", "gspo")
KNOWN_UNSUPPORTED = ("stable_reinforce", "custom")

# The inputs each loss reads besides target_tokens (which every loss needs).
INPUTS: dict[str, tuple[str, ...]] = {
    "cross_entropy": ("weights",),
    "importance_sampling": ("logprobs", "advantages"),
    "ppo": ("logprobs", "advantages"),
    "cispo": ("logprobs", "advantages"),
    "dro": ("logprobs", "advantages"),
    "gspo": ("logprobs", "advantages", "sequence_ratio_mask"),
}
# (clip_low_threshold, clip_high_threshold) when loss_fn_config gives none, as Tinker documents them.
CLIP = {"ppo": (0.8, 1.2), "cispo": (0.0, 4.0)}
# The loss_fn_config keys each loss takes.
SETTINGS = {"ppo": ("clip_low_threshold", "clip_high_threshold"), "cispo": ("clip_low_threshold", "clip_high_threshold"),
            "dro": ("beta",), "gspo": ("clip_low_threshold", "clip_high_threshold")}



class LossError(ValueError):
    """A loss the server does not compute, or inputs that do not fit it (the caller's error)."""


def check(name: str, config: dict[str, Any] | None) -> None:
    """Refuse a loss before any work starts."""
    if name in SUPPORTED:
        if config:
            takes = SETTINGS.get(name, ())
            extra = sorted(set(config) - set(takes))
            if extra:
                raise LossError(f"loss_fn_config {', '.join(extra)}: not a setting of {name!r} on this server"
                                + (f" ({name} takes {' and '.join(takes)})" if takes else ""))
            for key, v in sorted(config.items()):  # the SDK's config may carry text as well as numbers
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                    raise LossError(f"loss_fn_config {key} {v!r}: must be a finite number")
        if name == "dro" and "beta" not in (config or {}):
            raise LossError("loss 'dro' needs loss_fn_config beta (the weight of its quadratic penalty, e.g. "
                            "{\"beta\": 0.05}): Tinker's documentation gives none by default")
        missing = [k for k in SETTINGS["gspo"] if k not in (config or {})]
        if name == "gspo" and missing:
            raise LossError(f"loss 'gspo' needs loss_fn_config {' and '.join(missing)} (bounds of the sequence ratio, "
                            "e.g. {\"clip_low_threshold\": 0.9997, \"clip_high_threshold\": 1.0004} as GSPO's paper "
                            "clips): Tinker's documentation gives none by default")
        if name == "dro" and float(config["beta"]) < 0:
            raise LossError(f"loss_fn_config beta {config['beta']!r}: must be 0 or more")
        return
    if name in KNOWN_UNSUPPORTED:
        raise LossError(f"loss {name!r} is not implemented by this server (clustertune serve); it computes "
                        f"{', '.join(SUPPORTED)}")
    raise LossError(f"unknown loss {name!r}; this server computes {', '.join(SUPPORTED)}")


# Losses that are not a sum of one term per token: computed a datum at a time. The others are
# computed once over every datum's tokens together (the same sum, far fewer kernels).
PER_SEQUENCE = ("gspo",)


def check_inputs(name: str, inputs: dict[str, Any], shape: tuple[int, ...]) -> None:
    """The ``loss_fn_inputs`` loss ``name`` reads are all there, each one value per target token."""
    missing = [k for k in INPUTS[name] if k not in inputs]
    if missing:
        raise LossError(f"loss {name!r} needs loss_fn_inputs {', '.join(missing)} (given: {', '.join(sorted(inputs))})")
    for key in INPUTS[name]:
        if tuple(inputs[key].shape) != shape:
            raise LossError(f"loss_fn_inputs[{key!r}] has shape {tuple(inputs[key].shape)}; target_tokens has "
                            f"{shape}: give one value per target token")


def with_gradient(name: str, inputs: dict[str, Any], n: int) -> Any:
    """Which of a datum's ``n`` target tokens the loss can move (a numpy bool array): those whose
    weight (``cross_entropy``) or advantage (the policy losses) is not zero. Elsewhere each term
    is zero whatever the log-probability, so its gradient is too; ``dro``'s penalty moves every
    token. The inputs are checked first (:func:`check_inputs`)."""
    import numpy as np

    check_inputs(name, inputs, (n,))
    key = {"cross_entropy": "weights", "dro": None}.get(name, "advantages")
    return inputs[key] != 0 if key else np.ones(n, dtype=bool)


def datum_loss(name: str, logprobs: Any, inputs: dict[str, Any], config: dict[str, Any] | None) -> Any:
    """The loss of one datum (a 0-d tensor) from its target log-probabilities (1-d, one per
    target token) and its ``loss_fn_inputs`` as tensors of the same length."""
    import torch

    check_inputs(name, inputs, tuple(logprobs.shape))
    if name == "cross_entropy":
        return -(inputs["weights"].to(logprobs.dtype) * logprobs).sum()
    ratio = torch.exp(logprobs - inputs["logprobs"].to(logprobs.dtype))
    advantages = inputs["advantages"].to(logprobs.dtype)
    if name == "importance_sampling":
        return -(ratio * advantages).sum()
    if name == "dro":
        beta = float((config or {})["beta"])  # check() refused a request without it
        drift = logprobs - inputs["logprobs"].to(logprobs.dtype)
        return -(logprobs * advantages - 0.5 * beta * drift ** 2).sum()
    if name == "gspo":
        return _gspo(logprobs, inputs, advantages, config or {})
    low, high = (float((config or {}).get("clip_low_threshold", CLIP[name][0])),
                 float((config or {}).get("clip_high_threshold", CLIP[name][1])))
    if name == "cispo":
        if not 0 <= low <= high:
            raise LossError(f"loss_fn_config: cispo wants 0 <= clip_low_threshold <= clip_high_threshold "
                            f"(given {low} and {high})")
        # The clipped ratio weighs each token's log-probability; it carries no gradient itself.
        return -(ratio.clamp(low, high).detach() * logprobs * advantages).sum()
    if not 0 < low <= 1 <= high:
        raise LossError(f"loss_fn_config: ppo wants 0 < clip_low_threshold <= 1 <= clip_high_threshold "
                        f"(given {low} and {high})")
    clipped = ratio.clamp(low, high)
    return -torch.minimum(ratio * advantages, clipped * advantages).sum()


def _gspo(logprobs: Any, inputs: dict[str, Any], advantages: Any, config: dict[str, Any]) -> Any:
    """GSPO-token: the ppo objective with each token's ratio replaced by the sequence's (the mean
    log-ratio over the tokens ``sequence_ratio_mask`` marks), which keeps its own gradient."""
    import torch

    low, high = float(config["clip_low_threshold"]), float(config["clip_high_threshold"])  # check() asked for both
    if not 0 < low <= 1 <= high:
        raise LossError(f"loss_fn_config: gspo wants 0 < clip_low_threshold <= 1 <= clip_high_threshold "
                        f"(given {low} and {high})")
    in_ratio = inputs["sequence_ratio_mask"] != 0
    if not bool(in_ratio.any()):
        raise LossError("loss_fn_inputs['sequence_ratio_mask'] marks no token: mark the sampled tokens whose "
                        "ratios make the sequence's (1 for each, 0 for the prompt)")
    log_ratio = (logprobs.detach() - inputs["logprobs"].to(logprobs.dtype))[in_ratio].mean()
    # The sequence ratio's value on every token, with that token's own log-probability's gradient.
    ratio = torch.exp(log_ratio + logprobs - logprobs.detach())
    clipped = ratio.clamp(low, high)
    return -torch.minimum(ratio * advantages, clipped * advantages).sum()
