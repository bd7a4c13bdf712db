"""The OpenAI request checks, without a model: every field that would change an answer is honoured
or refused by name (never ignored), a seed is one the generators take, and the sampling rules are
the ones the Tinker API's sampling_params are held to."""

from __future__ import annotations

from typing import Any

import pytest

from clustertune.serve.protocol import ApiError, check_sampling, read_chat, read_completion


def chat(**extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": "hi"}], **extra}


def refused(read: Any, body: dict[str, Any]) -> ApiError:
    with pytest.raises(ApiError) as e:
        read(body)
    assert e.value.status == 400 and e.value.body()["error"]["type"] == "invalid_request_error"
    return e.value


@pytest.mark.parametrize("seed", [-1, 2**32, 1.5, "7", True])
def test_a_seed_the_generators_cannot_take_is_a_400_naming_it(seed: Any) -> None:
    for read, body in ((read_chat, chat(seed=seed)), (read_completion, {"model": "m", "prompt": "x", "seed": seed})):
        err = refused(read, body)
        assert err.param == "seed" and "0 to 4294967295" in err.message, err.message
    assert read_chat(chat(seed=0)).sampled.seed == 0 and read_chat(chat(seed=2**32 - 1)).sampled.seed == 2**32 - 1


def test_fields_that_would_change_the_answer_are_refused_by_name_not_ignored() -> None:
    cases = [
        (read_chat, chat(logit_bias={"50": -100}), "logit_bias"),
        (read_completion, {"model": "m", "prompt": "x", "logit_bias": {"50": 5}}, "logit_bias"),
        (read_chat, chat(tool_choice="auto"), "tool_choice"),
        (read_chat, chat(modalities=["text", "audio"]), "modalities"),
        (read_chat, chat(audio={"voice": "alloy", "format": "wav"}), "audio"),
        (read_chat, chat(reasoning_effort="high"), "reasoning_effort"),
        (read_chat, chat(prediction={"type": "content", "content": "x"}), "prediction"),
        # A field OpenAI's protocol does not have (vLLM's extras, a typo) is not silently dropped.
        (read_chat, chat(top_k=5), "top_k"),
        (read_completion, {"model": "m", "prompt": "x", "repetition_penalty": 1.2}, "repetition_penalty"),
        (read_chat, chat(temprature=0), "temprature"),
    ]
    for read, body, param in cases:
        err = refused(read, body)
        assert err.param == param and err.message.startswith(param), (param, err.message)
    # What changes nothing, or is neutral, is taken.
    ask = read_chat(chat(logit_bias={}, user="u", metadata={"k": "v"}, store=False, tool_choice="none",
                         parallel_tool_calls=False, modalities=["text"], service_tier="auto"))
    assert ask.sampled.n == 1


@pytest.mark.parametrize("field,value", [("max_tokens", 0), ("temperature", -0.5), ("temperature", float("nan")),
                                         ("top_p", float("inf")), ("n", 0), ("seed", -1)])
def test_the_shared_sampling_rules_name_the_field_with_its_prefix(field: str, value: Any) -> None:
    with pytest.raises(ApiError) as e:
        check_sampling({field: value}, prefix="sampling_params.")
    assert e.value.param == f"sampling_params.{field}", e.value.message
    assert check_sampling({}).max_tokens is None and check_sampling({"top_p": 0}).top_p == 1.0
