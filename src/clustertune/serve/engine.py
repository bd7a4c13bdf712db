"""Answers to requests, drawn from one loaded model.

Two ways to draw, chosen per request:

- **batched** (the default): transformers' continuous batching. Every admitted request joins
  the running batch at its next step and leaves it when done; each carries its own temperature
  and top-p (greedy is top-k 1). Tokens stream out as they are drawn; a request whose client
  went away is cancelled at the next step, which frees its place.
- **exact**: a request with a ``seed`` or asking for log-probabilities is answered alone with
  ``generate``, the batch paused meanwhile: the same seed gives the same answers whatever else
  is being served, and log-probabilities are the model's own (before temperature and top-p).
  Its text arrives in one piece.

Prompts are written as :class:`~clustertune.use.generate.Generator` writes them for
``clustertune generate``: a conversation with the chat template the model was trained with, a
completion as plain text. An answer ends at an end-of-text token, the template's end-of-turn
marker, or one of the request's stop strings; nothing from a stop string on is sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from clustertune.errors import UserError
from clustertune.serve.adapters import BASE, AdapterSet, Turns
from clustertune.serve.protocol import ApiError, Ask, Choice, Sampled
from clustertune.serve.sampling import BatchSampler
from clustertune.serve.text_cut import TextCut
from clustertune.use.generate import Generator, PromptTooLong, seed as seed_all, text_ids
from clustertune.use.load import Loaded, load_tokenizer_for

# Above this many tokens per batch step the CPU spends its time in attention over padding-free
# but long prompts; GPUs are sized by transformers from their free memory instead.
_CPU_BATCH_TOKENS = 512
_PAGE = 32
# The default --max-body: generous for any prompt the model can read (a token is a few
# characters, at most 6 bytes each as JSON escapes them), and never under a few MB.
_BODY_FLOOR = 4 << 20
_BODY_PER_TOKEN = 64


@dataclass(frozen=True)
class Limits:
    """How many requests are answered at once, how many more may wait, and the default length."""

    running: int = 16
    waiting: int = 64
    max_tokens: int = 512
    max_body: int | None = None  # bytes of a request body; None: sized from the model's context


class Ticket:
    """One request's place: counted from when it is admitted, answering once :meth:`wait` returns;
    :meth:`release` (safe to call twice) gives both back."""

    def __init__(self, engine: Engine, running: asyncio.Semaphore):
        self._engine, self._running = engine, running
        self._open, self._held = True, False
        engine._busy += 1

    async def wait(self) -> None:
        await self._running.acquire()
        self._held = True

    def release(self) -> None:
        if self._open:
            self._open = False
            self._engine._busy -= 1
            if self._held:
                self._held = False
                self._running.release()


class Engine:
    """One model served: load it (:meth:`load`, in a thread), then :meth:`answer` requests."""

    def __init__(self, loaded_fn: Any, model_id: str, limits: Limits = Limits(), adapters: AdapterSet | None = None):
        self._load_fn = loaded_fn
        self.model_id = model_id
        self.limits = limits
        # Adapters of the served base (serve/adapters.py): the batch answers for one at a time.
        self.adapters = adapters
        self.turns = Turns(self._switch) if adapters is not None else None
        self._gens: dict[str, Generator] = {}
        self.gen: Generator | None = None
        self.failed: str | None = None
        self.fidelity: Any = None  # what the check against the trained model found (use/fidelity.py), if it ran
        self.error: BaseException | None = None  # why loading failed
        self._manager: Any = None
        self._exact = threading.Lock()
        self._busy = 0
        self._admit: asyncio.Semaphore | None = None
        self._closed = False
        # Prompts are tokenized (and templates rendered) here, one at a time, off the event loop:
        # a long prompt never holds up /health or the streams being answered.
        self._prompts = ThreadPoolExecutor(1, thread_name_prefix="serve-prompts")

    # ------------------------------------------------------------------ loading
    def load(self) -> None:
        """Load the model and start the batch; sets :attr:`failed` instead of raising."""
        try:
            gen = self._load_fn()
            if self.adapters is not None:
                self.adapters.load_listed(gen.model)
            self._manager = _start_batching(gen, self.limits)
            self.gen = gen
        except Exception as exc:  # reported by /health and every request; the server then stops
            self.error = exc
            self.failed = str(exc) if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}"

    @property
    def ready(self) -> bool:
        return self.gen is not None

    @property
    def stopped(self) -> str | None:
        """Why the batch has stopped answering (its thread died), None while it runs: /health
        says so, since no request would be answered."""
        mgr = self._manager
        if mgr is None or self._closed or mgr.is_running():
            return None
        return f"the batch stopped: {mgr.background_thread_status.fatal_error or 'no reason given'}"

    @property
    def max_body(self) -> int:
        """The largest request body taken, in bytes (``Limits.max_body``, else from the context)."""
        if self.limits.max_body is not None:
            return self.limits.max_body
        context = self.gen.context if self.gen is not None else None
        return max(_BODY_FLOOR, _BODY_PER_TOKEN * (context or 0))

    def close(self) -> None:
        self._closed = True
        self._prompts.shutdown(wait=False, cancel_futures=True)
        if self._manager is not None:
            with contextlib.suppress(Exception):
                self._manager.stop(block=True, timeout=10)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """The batch held between two steps for the block (its requests keep their places and go
        on after it): for work on the model itself, such as changing its weights."""
        self.require_ready()
        with self._manager.pause():
            yield

    def require_ready(self) -> Generator:
        if self.failed is not None:
            raise ApiError(500, f"the model failed to load: {self.failed}", kind="server_error")
        if self.gen is None:
            raise ApiError(503, "the model is still loading; retry shortly", kind="server_error",
                           code="model_loading", headers={"Retry-After": "2"})
        return self.gen

    # ------------------------------------------------------------------ adapters
    def pick(self, model_id: str) -> str:
        """The key of what answers a request for ``model_id``: BASE for the served model itself,
        else an adapter of it (loaded on first use); 404 for anything else."""
        if model_id == self.model_id:
            return BASE
        ref = self.adapters.find(model_id) if self.adapters is not None else None
        if ref is None:
            raise ApiError(404, f"model {model_id!r} is not served here; this server serves {self.model_id!r}"
                           + (" and the adapter runs of it, each by its run id (GET /v1/models lists them)"
                              if self.adapters is not None else ""), param="model", code="model_not_found")
        return ref.id

    def served_ids(self) -> list[str]:
        """The base's id, then every adapter of it that can be served now (loaded or not)."""
        return [self.model_id, *(self.adapters.servable() if self.adapters is not None else [])]

    def gen_for(self, key: str) -> Generator:
        """The prompts' writer for ``key``: an adapter run's own tokenizer and chat template over
        the one model."""
        gen = self.require_ready()
        if key == BASE:
            return gen
        if key not in self._gens:
            assert self.adapters is not None
            target = self.adapters.known[key].target
            self._gens[key] = Generator(Loaded(target=target, model=gen.model, tokenizer=load_tokenizer_for(target),
                                               device=gen.device))
        return self._gens[key]

    def _switch(self, key: str) -> None:
        assert self.adapters is not None
        gen = self.require_ready()
        self.adapters.switch(gen.model, key, self._manager.pause)

    @contextlib.asynccontextmanager
    async def turn(self, key: str) -> AsyncIterator[None]:
        """The model answering for ``key`` for the block (the adapters' turns, serve/adapters.py)."""
        if self.turns is None:
            yield
            return
        async with self.turns.turn(key):
            yield

    # ------------------------------------------------------------------ admission
    def ticket(self) -> Ticket:
        """A place in line; 429 when the line is full. Release it with :meth:`Ticket.release`."""
        if self._admit is None:
            self._admit = asyncio.Semaphore(self.limits.running)
        if self._busy >= self.limits.running + self.limits.waiting:
            raise ApiError(429, f"the server is answering {self.limits.running} requests and {self.limits.waiting} "
                                "more are waiting; retry later", kind="rate_limit_error", code="queue_full",
                           headers={"Retry-After": "1"})
        return Ticket(self, self._admit)

    @contextlib.asynccontextmanager
    async def admitted(self) -> AsyncIterator[None]:
        """A place among the requests answered at once, held for the block."""
        ticket = self.ticket()
        try:
            await ticket.wait()
            yield
        finally:
            ticket.release()

    # ------------------------------------------------------------------ prompts
    async def encode_off_loop(self, ask: Ask) -> tuple[list[int], bool]:
        """:meth:`encode` on the prompt thread, the event loop free meanwhile."""
        return await asyncio.get_running_loop().run_in_executor(self._prompts, self.encode, ask)

    def encode(self, ask: Ask) -> tuple[list[int], bool]:
        """The prompt's token ids, and whether it is a chat (answers stripped, marker stops); a
        prompt longer than the model reads is refused (413) as it is counted."""
        self.require_ready()
        gen = self.gen_for(self.pick(ask.model))
        try:
            return self._encode(gen, ask)
        except PromptTooLong as exc:
            self.room(exc.tokens, ask.sampled)
            raise  # room() refuses every prompt over the context

    def _encode(self, gen: Generator, ask: Ask) -> tuple[list[int], bool]:
        if ask.messages is not None:
            if not gen.chat:
                raise ApiError(400, f"{ask.model} has no chat template, so it cannot answer a conversation: "
                                    "send plain text to /v1/completions", param="messages")
            from jinja2 import TemplateError

            try:
                return gen.encode(ask.messages, most=gen.context), True
            except TemplateError as exc:  # the template's own raise_exception ("roles must alternate")
                raise ApiError(400, f"messages: the chat template of {ask.model} refuses this conversation: "
                                    f"{exc}", param="messages") from None
        ids = text_ids(gen.tokenizer, ask.prompt, add_special_tokens=True, most=gen.context)
        if not ids:
            raise ApiError(400, "prompt: empty; send some text to continue", param="prompt")
        return ids, False

    def room(self, prompt_len: int, s: Sampled) -> int:
        gen = self.require_ready()
        want = s.max_tokens or self.limits.max_tokens
        if gen.context is None:
            return want
        if prompt_len >= gen.context:
            raise ApiError(413, f"the prompt is {prompt_len} tokens and {self.model_id} reads at most {gen.context}; "
                                "shorten it", param="messages" if gen.chat else "prompt", code="context_length_exceeded")
        return min(want, gen.context - prompt_len)

    # ------------------------------------------------------------------ answering
    async def answer(self, ask: Ask, ids: list[int], chat: bool) -> AsyncIterator[tuple[int, str, Choice | None]]:
        """``(choice index, new text, the finished choice or None)`` as answers grow. Cancelling
        the iteration (a client that went away) cancels what is still being drawn."""
        self.require_ready()
        key = self.pick(ask.model)
        gen = self.gen_for(key)
        s = ask.sampled
        max_new = self.room(len(ids), s)
        stops = (list(gen.stops) if chat else []) + list(s.stop)
        async with self.turn(key):
            if s.exact:
                for choice in await asyncio.to_thread(self._exact_answers, gen, ids, s, max_new, stops, chat):
                    yield choice.index, choice.text, choice
                return
            # Token by token only where someone reads them: a stream, or stop strings to watch for (a
            # marker that is one token is an end-of-text id, which the batch stops at by itself).
            watch = ask.stream or bool(s.stop) or (chat and bool(gen.stops) and not gen.marker_is_token())
            async for item in self._batched(gen, ids, s, max_new, stops, chat, watch):
                yield item

    async def _batched(self, gen: Generator, ids: list[int], s: Sampled, max_new: int, stops: list[str], chat: bool,
                       watch: bool) -> AsyncIterator[tuple[int, str, Choice | None]]:
        mgr = self._manager
        results: asyncio.Queue[Any] = asyncio.Queue()
        base = uuid.uuid4().hex
        rids = [f"{base}-{i}" for i in range(s.n)]
        cuts = [TextCut(gen.tokenizer, stops, gen.eos_ids, chat) for _ in rids]
        choices = [Choice(index=i) for i in range(s.n)]
        # Read by the batch's sampler (serve/sampling.py): temperature 0 is argmax, with no work per token.
        kwargs = {"temperature": 0.0 if s.greedy else float(s.temperature), "top_p": float(s.top_p)}
        live = set(rids)
        try:
            for rid in rids:
                mgr.register_result_handler(rid, results.put_nowait)
                mgr.add_request(ids, request_id=rid, max_new_tokens=max_new, streaming=watch,
                                eos_token_id=gen.eos_ids or -1, **kwargs)
            while live:
                try:
                    out = await asyncio.wait_for(results.get(), timeout=1.0)
                except asyncio.TimeoutError:
                    if not mgr.is_running():
                        raise ApiError(500, "the batch stopped: "
                                       f"{mgr.background_thread_status.fatal_error or 'no reason given'}",
                                       kind="server_error") from None
                    continue
                if out.request_id not in live:
                    continue
                i = rids.index(out.request_id)
                if out.error:
                    raise ApiError(500, f"generation failed: {out.error}", kind="server_error")
                tokens = list(out.generated_tokens)
                finished = out.is_finished()
                delta, done = cuts[i].feed(tokens, final=finished)
                c = choices[i]
                c.text += delta
                c.tokens = len(tokens)
                if done:
                    live.discard(out.request_id)
                    if not finished:  # a stop string: no more tokens for it
                        mgr.cancel_request(out.request_id)
                    ended = cuts[i].stopped or any(t in gen.eos_ids for t in tokens)
                    c.finish_reason = "stop" if ended or len(tokens) < max_new else "length"
                    yield i, delta, c
                elif delta:
                    yield i, delta, None
        finally:
            for rid in live:  # the client left, or an error: free the places they hold
                mgr.cancel_request(rid)
            handlers = getattr(getattr(mgr, "output_router", None), "result_handlers", None)
            for rid in rids:
                if isinstance(handlers, dict):
                    handlers.pop(rid, None)

    def _exact_answers(self, gen: Generator, ids: list[int], s: Sampled, max_new: int, stops: list[str],
                       chat: bool) -> list[Choice]:
        import torch

        tok = gen.tokenizer
        with self._exact, self._manager.pause():
            seed_all(s.seed)
            kwargs: dict[str, Any] = ({"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
                                      if s.greedy else {"do_sample": True, "temperature": s.temperature,
                                                        "top_p": s.top_p, "top_k": None})
            pad = tok.pad_token_id if tok.pad_token_id is not None else (gen.eos_ids or [0])[0]
            # Greedy answers are all the same one, and generate refuses to draw it more than once.
            drawn_n = 1 if s.greedy else s.n
            with torch.inference_mode():
                out = gen.model.generate(input_ids=torch.tensor([ids], device=gen.device), max_new_tokens=max_new,
                                         num_return_sequences=drawn_n, pad_token_id=pad,
                                         eos_token_id=gen.eos_ids or None, output_logits=s.logprobs,
                                         return_dict_in_generate=True, **kwargs)
        rows = out.sequences[:, len(ids):].tolist()
        choices = []
        for i in range(s.n):
            row = rows[i % drawn_n]
            cut = TextCut(tok, stops, gen.eos_ids, chat)
            text, _ = cut.feed(row, final=True)
            end = next((k for k, t in enumerate(row) if t in gen.eos_ids), None)
            drawn = row[: end + 1] if end is not None else row
            ended = cut.stopped or end is not None
            c = Choice(index=i, text=text, tokens=len(drawn),
                       finish_reason="stop" if ended or len(drawn) < max_new else "length")
            if s.logprobs:
                c.logprobs = _logprobs(tok, [lg[i % drawn_n] for lg in out.logits[: len(drawn)]], drawn, s.top_logprobs)
            choices.append(c)
        return choices

    @property
    def busy(self) -> int:
        return self._busy


def _logprobs(tok: Any, logits: list[Any], tokens: list[int], top: int) -> list[dict[str, Any]]:
    import torch

    entries = []
    for lg, t in zip(logits, tokens):
        lp = torch.log_softmax(lg.float(), dim=-1)
        alts = torch.topk(lp, top).indices.tolist() if top else []
        entries.append({**_entry(tok, t, float(lp[t])),
                        "top_logprobs": [_entry(tok, a, float(lp[a])) for a in alts]})
    return entries


def _entry(tok: Any, token: int, logprob: float) -> dict[str, Any]:
    text = tok.decode([token])
    return {"token": text, "logprob": logprob if math.isfinite(logprob) else -9999.0,
            "bytes": list(text.encode("utf-8"))}


def _start_batching(gen: Generator, limits: Limits) -> Any:
    """transformers' continuous batching on the loaded model, each request drawn as it asks
    (serve/sampling.py: greedy by argmax alone, sampled rows with their own temperature and top-p)."""
    from transformers import GenerationConfig
    from transformers.generation.configuration_utils import ContinuousBatchingConfig

    tok = gen.tokenizer
    pad = tok.pad_token_id if tok.pad_token_id is not None else (gen.eos_ids or [0])[0]
    # The batch itself is greedy (its step ends in argmax, no processors of its own); the sampler
    # put in their place below turns only the rows that sample into scores whose argmax is a draw.
    config = GenerationConfig(do_sample=False, max_new_tokens=limits.max_tokens, eos_token_id=gen.eos_ids or -1,
                              pad_token_id=pad)
    sized: dict[str, Any] = {}
    if not str(gen.device).startswith("cuda"):
        # On the CPU the cache is sized from what is served, not from free memory (which would be
        # most of the machine's RAM, allocated before the first request): one full context per
        # place (8x the blocks made every step about twice as slow here: benchmarks/RESULTS.md, serving).
        per_request = math.ceil((gen.context or limits.max_tokens * 2) / _PAGE)
        sized = {"num_blocks": max(16, per_request * limits.running), "max_batch_tokens": _CPU_BATCH_TOKENS,
                 "page_size": _PAGE}
    else:
        # The share of free memory transformers leaves for processors' temporaries when it has
        # some (the batch is built believing it has none).
        sized = {"max_memory_percent": 0.8}
    cb = ContinuousBatchingConfig(auto_switch_to_flash=False, **sized)
    mgr = gen.model.init_continuous_batching(generation_config=config, continuous_batching_config=cb)
    resolved = mgr.continuous_batching_config
    graphs = resolved.use_cuda_graph
    captured = any(graphs) if isinstance(graphs, tuple) else bool(graphs)
    compiled = resolved.varlen_compile_config is not None or resolved.decode_compile_config is not None
    # A captured or compiled step cannot branch on which rows sample: that sampler computes every row.
    mgr.logit_processor = BatchSampler(eager=not (captured or compiled))
    mgr.start()
    return mgr
