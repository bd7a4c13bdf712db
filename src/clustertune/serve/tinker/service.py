"""The Tinker service: sessions, training clients and samplers, each call queued as the SDK expects.

Calls that change or read weights return a request id at once and run on the one worker
(:mod:`~clustertune.serve.tinker.work`); the SDK polls for their results. A result is
``("json", dict)`` or ``("proto", bytes)``; a failure is the SDK's ``{"error", "category"}``,
``user`` for what the caller can fix (a wrong shape, an unknown loss or base), ``server`` for the
rest, and the server goes on serving either way.

Ids follow the SDK's own conventions: a training client is ``SESSION:train:N`` (the SDK computes
that id itself when it creates a client from a checkpoint), a sampler ``SESSION:sample:N``.
"""

from __future__ import annotations

import logging
import threading
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from clustertune.errors import UserError
from clustertune.serve.tinker import fields, forward, lora, wire
from clustertune.serve.tinker import sampling as sampling_of
from clustertune.serve.tinker.bases import resolve_base
from clustertune.serve.tinker.sampling import Sampler, prompt_tokens, read_sampling, with_end_of_text
from clustertune.serve.tinker.losses import LossError, check
from clustertune.serve.tinker.lora import DIMUON_WHY, Base, LoraSpec, Trainee, TinkerUserError
from clustertune.serve.tinker.store import Store
from clustertune.serve.tinker.work import Work

log = logging.getLogger("clustertune.serve.tinker")

# Sampler adapters kept loaded per base (each RL iteration makes one); older ones load again
# from disk if asked for.
LOADED_SAMPLERS = 4
# The requests of a training client that take a seq_id (the names its refusals give them).
TRAINING_ROUTES = ("forward", "forward_backward", "optim_step", "save_state", "load_state", "save_weights_for_sampler")


def now() -> str:
    return datetime.now(timezone.utc).isoformat()


class TinkerService:
    def __init__(self, root: Path, *, runs_root: str | None = None, device: str | None = None, dtype: str = "auto",
                 save_every: int = 0):
        self.store = Store(root)
        self.save_every = save_every
        self._received: dict[str, int] = {}  # the highest seq_id each training client sent
        self.runs_root = runs_root
        self.device = device
        self.dtype = dtype
        self.work = Work()
        self.bases: dict[str, Base] = {}
        self.trainees: dict[str, Trainee] = {}
        self.samplers: dict[str, Sampler] = {}
        self._dropped: dict[str, str] = {}  # sampler id -> the deleted checkpoint it was made from
        self.sessions: dict[str, dict[str, Any]] = {}
        self._names = iter(range(1, 1 << 62))
        self._lock = threading.Lock()
        for sid, v in self.store.sampler_records().items():  # a server started again: its samplers stand
            self.samplers[sid] = Sampler(sid, v["base"], Path(v["adapter_dir"]) if v.get("adapter_dir") else None,
                                         v.get("model_path"))

    def close(self) -> None:
        """Stop the work (the request being done finishes) and save every training client's
        weights and Adam state (``tinker://MODEL_ID/weights/server-stop``): a server started again
        over the same directory (a requeued job, a restart) carries on with the clients where they
        were."""
        self.work.stop()
        for t in list(self.trainees.values()):
            # Requests queued but not done are lost with this server (their clients are told: the
            # results are gone); the next request a client sends comes after them.
            t.last_seq = max(t.last_seq, self._received.get(t.model_id, 0))
            try:
                lora.save_state(t, self.store.dir(self.store.latest(t.model_id)), optimizer=True, kind="weights")
            except Exception:  # noqa: BLE001 - one client's failure must not lose the others'
                log.exception("could not save the state of %s", t.model_id)

    # -- sessions ---------------------------------------------------------------------------------

    def create_session(self, body: dict[str, Any]) -> dict[str, Any]:
        sid = f"s{uuid.uuid4().hex[:12]}"
        with self._lock:
            self.sessions[sid] = {"started": now(), "tags": fields.plain_json(body, "tags", list), "models": [],
                                  "samplers": [], "user_metadata": fields.plain_json(body, "user_metadata", dict)}
        return {"session_id": sid, "type": "create_session"}

    def session(self, sid: str) -> dict[str, Any]:
        """The session ``sid``; one this server has not seen (it was started again since) is
        taken as it comes, so its clients carry on."""
        sid = fields.session_id({"session_id": sid})
        with self._lock:
            return self.sessions.setdefault(sid, {"started": now(), "tags": [], "models": [], "samplers": [],
                                                  "user_metadata": {}})

    # -- bases --------------------------------------------------------------------------------------

    def base(self, ref: str) -> Base:
        """The base model ``ref`` names, loaded once (on the worker thread)."""
        target, tokenizer_dir = resolve_base(ref, self.runs_root)
        key = str(target.path)
        if key not in self.bases:
            # Deferred: loading imports torch and transformers, which the server's start does without.
            from clustertune.use.load import load_model_for, load_tokenizer_for, pick_device

            dev = pick_device(self.device)
            model = load_model_for(target, device=dev, dtype=self.dtype, merge=True)
            self.bases[key] = Base(ref=ref, path=target.path, model=model, tokenizer=load_tokenizer_for(target),
                                   device=dev, tokenizer_dir=tokenizer_dir)
        return self.bases[key]

    # -- futures ------------------------------------------------------------------------------------

    def _run(self, fn: Any) -> Any:
        """``fn`` with its failures turned into the SDK's error shape."""
        def job() -> Any:
            try:
                return fn()
            except (TinkerUserError, LossError, UserError) as exc:
                return ("error", {"error": str(exc), "category": "user"})
            except Exception as exc:  # noqa: BLE001 - the client is told; the server goes on
                log.exception("a Tinker request failed")
                return ("error", {"error": f"{type(exc).__name__}: {exc}", "category": "server"})
        return job

    def failed(self, message: str, request: dict[str, Any] | None = None) -> str:
        if request is not None:
            self.pass_over(request)
        return self.work.done(("error", {"error": message, "category": "user"}))

    def pass_over(self, request: dict[str, Any]) -> None:
        """A training client's request answered without being queued (refused, or failed at once)
        used up its seq_id: the client's next requests must not wait work.GAP_WAIT_S for it."""
        model_id, seq = request.get("model_id"), request.get("seq_id")
        if isinstance(model_id, str) and isinstance(seq, int) and not isinstance(seq, bool):
            self.work.pass_over(model_id, seq)

    def trainee(self, model_id: str) -> Trainee:
        """The training client ``model_id``; one saved when this server last stopped is loaded
        again (on the worker thread: it may load its base)."""
        t = self.trainees.get(model_id)
        if t is not None:
            return t
        record = self.store.model_record(model_id)
        if record is None:
            known = ", ".join(sorted(self.trainees)) or "none"
            raise TinkerUserError(f"model_id {model_id!r} is not a training client of this server (known: {known})")
        latest = self.store.dir(self.store.latest(model_id))
        if not (latest / lora.STATE).is_file():
            raise TinkerUserError(f"training client {model_id!r}: the server stopped without saving its state (it "
                                  f"was killed); {self._fallback(model_id)}")
        t = self._new_trainee(model_id, record["base_model"], LoraSpec(**record["lora"]), record=False)
        lora.load_state(t, latest, optimizer=True)
        t.last_seq = t.restored_seq = int(lora.read_state(latest).get("seq", 0))
        log.info("training client %s restored at step %d", model_id, t.steps)
        return t

    def _fallback(self, model_id: str) -> str:
        saved = [c["tinker_path"] for c in self.store.checkpoints(model_id) if c["checkpoint_type"] == "training"]
        if not saved:
            return "it has no saved state: create a new training client"
        return (f"create a client from its newest saved state with create_training_client_from_state_with_optimizer"
                f"({saved[-1]!r})")

    # -- training clients ---------------------------------------------------------------------------

    def create_model(self, body: dict[str, Any]) -> str:
        sid = fields.session_id(body)
        model_id = f"{sid}:train:{fields.whole(body, 'model_seq_id', 0, lo=0)}"
        try:
            self.session(sid)
            spec = LoraSpec.of(fields.obj(body, "lora_config"))
            optimizer = fields.obj(body, "optimizer_config").get("type", "adamw")
            if optimizer != "adamw":
                raise TinkerUserError(f"optimizer_config type {optimizer!r}: this server trains with adamw only"
                                      + (DIMUON_WHY if optimizer == "dimuon" else "")
                                      + "; create the client with types.AdamOptimizerConfig() (the default)")
            base_ref = fields.text(body, "base_model")
            resolve_base(base_ref, self.runs_root)  # a wrong name fails now, not after the queue
        except (TinkerUserError, UserError) as exc:
            return self.failed(str(exc))

        def create() -> Any:
            self._new_trainee(model_id, base_ref, spec)
            return ("json", {"model_id": model_id, "type": "create_model"})

        self.work.expect(model_id, 0)
        return self.work.submit(model_id, self._run(create), 0, once=("create", model_id))

    def _new_trainee(self, model_id: str, base_ref: str, spec: LoraSpec, record: bool = True) -> Trainee:
        base = self.base(base_ref)
        name = f"tk_{next(self._names)}"
        base.add(name, spec)
        t = Trainee(model_id, base, name, spec, base_ref=base_ref)
        self.trainees[model_id] = t
        if record:
            self.store.record_model(model_id, {"model_id": model_id, "base_model": base_ref,
                                               "base_path": str(base.path), "lora": vars(spec), "created": now()})
        sid = model_id.rsplit(":train:", 1)[0]
        if sid in self.sessions:
            self.sessions[sid]["models"].append(model_id)
        return t

    def get_info(self, body: dict[str, Any]) -> dict[str, Any]:
        model_id = fields.text(body, "model_id")
        t = self.trainees.get(model_id)
        if t is not None:
            base_ref, rank, arch, tokenizer_dir = t.base_ref, t.spec.rank, type(t.base._plain()).__name__, t.base.tokenizer_dir
        else:  # not loaded (yet, or again after a restart): from its record, without loading anything
            record = self.store.model_record(model_id)
            if record is None:
                raise TinkerUserError(f"model_id {model_id!r} is not a training client of this server")
            base_ref, rank, arch = record["base_model"], record["lora"]["rank"], None
            tokenizer_dir = resolve_base(base_ref, self.runs_root)[1]
        return {"type": "get_info", "model_id": model_id, "is_lora": True, "lora_rank": rank,
                "model_name": base_ref, "optimizer_config": {"type": "adamw"},
                "model_data": {"arch": arch, "model_name": base_ref, "tokenizer_id": str(tokenizer_dir)}}

    def _training(self, body: dict[str, Any], fn: Any, what: str) -> str:
        model_id = fields.text(body, "model_id")
        seq = fields.whole(body, "seq_id")
        if (model_id not in self.trainees and self.work.future_of(("create", model_id)) is None
                and self.store.model_record(model_id) is None):
            return self.failed(f"{what}: model_id {model_id!r} is not a training client of this server", body)
        if seq is not None:
            taken = self._seq_taken(model_id, seq, what)
            if taken is not None:
                return self.failed(f"seq_id {seq}: training client {model_id!r} already sent request {seq} as "
                                   f"{taken}; this {what} needs a seq_id of its own (the SDK numbers each request "
                                   "once; a retry resends the same request)", body)
            with self._lock:
                self._received[model_id] = max(self._received.get(model_id, 0), seq)

        def run() -> Any:
            t = self.trainee(model_id)
            if seq is not None:
                if t.restored_seq is not None and seq > t.restored_seq + 1:
                    # Restored from a save older than what the client did since: the server was
                    # killed, and carrying on would train from a state the client never had.
                    raise TinkerUserError(
                        f"training client {model_id!r} came back with its state as of request {t.restored_seq} "
                        f"(step {t.steps}); this is request {seq}: the server was killed and the requests between "
                        f"were lost; {self._fallback(model_id)}")
                t.restored_seq = None
                t.last_seq = seq
            return fn(t)

        # The route is part of the key: a retry (same route, same seq_id) gets the first answer, and
        # the same seq_id from another route is found by _seq_taken instead of answered with another
        # request's result.
        return self.work.submit(model_id, self._run(run), seq,
                                once=(model_id, seq, what) if seq is not None else None)

    def _seq_taken(self, model_id: str, seq: int, what: str) -> str | None:
        """The other route that request ``seq`` of ``model_id`` was sent as, if any."""
        return next((r for r in TRAINING_ROUTES if r != what and self.work.future_of((model_id, seq, r)) is not None),
                    None)

    def forward_backward(self, raw: bytes, encoding: str | None) -> str:
        """Queue a forward(-backward); a NaN or an infinity in the inputs raises
        :class:`TinkerUserError` at once (the route's 400), before anything is queued."""
        try:
            req = wire.read_forward_backward(raw, encoding)
        except (TinkerUserError, LossError) as exc:
            return self.failed(str(exc))
        try:
            check(req["loss"], req["config"])
            wire.check_finite(req["data"])  # first: a NaN among float targets is named with its position
            forward.check_targets(req["data"])
        except LossError as exc:
            return self.failed(str(exc), req)
        except TinkerUserError:
            self.pass_over(req)
            raise

        def run(t: Trainee) -> Any:
            outputs, metrics = forward.forward_backward(t, req["data"], req["loss"], req["config"],
                                                     backward=not req["forward_only"])
            return ("proto", wire.forward_backward_output(outputs, metrics))

        return self._training(req, run, "forward" if req["forward_only"] else "forward_backward")

    def optim_step(self, body: dict[str, Any]) -> str:
        params = body.get("adam_params")
        if params is None:
            kind = fields.obj(body, "optimizer_params").get("type")
            return self.failed(f"optim_step with {kind!r} parameters: this server steps with Adam (AdamParams) only"
                               + (DIMUON_WHY if kind == "dimuon" else ""), body)
        params = lora.adam_params(params)  # refused at the edge (400) when a number is wrong

        def run(t: Trainee) -> Any:
            metrics = lora.optim_step(t, params)
            if self.save_every and t.steps % self.save_every == 0:
                lora.save_state(t, self.store.dir(self.store.autosave(t.model_id)), optimizer=True, kind="weights")
            return ("json", {"metrics": metrics, "type": "optim_step"})
        return self._training(body, run, "optim_step")

    def save_weights(self, body: dict[str, Any]) -> str:
        name, overwrite = fields.text(body, "path"), fields.flag(body, "overwrite")

        def run(t: Trainee) -> Any:
            ref = self.store.ref(t.model_id, "weights", name, f"step-{t.steps}")
            if self.store.dir(ref).exists() and not overwrite:
                raise TinkerUserError(f"{ref.uri} exists: give another name, or overwrite=True")
            lora.save_state(t, self.store.dir(ref), optimizer=True, kind="weights")
            return ("json", {"path": ref.uri, "type": "save_weights"})
        return self._training(body, run, "save_state")

    def load_weights(self, body: dict[str, Any]) -> str:
        path = fields.text(body, "path")
        optimizer = fields.flag(body, "optimizer")
        if fields.text(body, "model_id"):
            def run(t: Trainee) -> Any:
                lora.load_state(t, self.store.existing(self.store.parse(path)), optimizer=optimizer)
                return ("json", {"path": path, "model_id": t.model_id, "type": "load_weights"})
            return self._training(body, run, "load_state")
        # A new training client from a checkpoint (its first request).
        sid = fields.session_id(body)
        model_id = f"{sid}:train:{fields.whole(body, 'model_seq_id', 0, lo=0)}"
        base_ref = fields.text(body, "base_model")
        try:
            self.session(sid)
            directory = self.store.existing(self.store.parse(path))
        except TinkerUserError as exc:
            return self.failed(str(exc))

        def create() -> Any:
            meta = lora.read_state(directory)
            t = self._new_trainee(model_id, base_ref or meta["base_model"],
                                  LoraSpec(**meta["lora"]))
            lora.load_state(t, directory, optimizer=optimizer)
            return ("json", {"path": path, "model_id": model_id, "type": "load_weights"})

        self.work.expect(model_id, 0)
        return self.work.submit(model_id, self._run(create), 0, once=("create", model_id))

    def save_weights_for_sampler(self, body: dict[str, Any]) -> str:
        name = fields.text(body, "path")
        n = fields.whole(body, "sampling_session_seq_id", lo=0)  # it names a directory: a number, nothing else

        def run(t: Trainee) -> Any:
            sid = t.model_id.rsplit(":train:", 1)[0]
            if name:
                ref = self.store.ref(t.model_id, "sampler_weights", name, "")
                lora.save_state(t, self.store.dir(ref), optimizer=False, kind="sampler")
                return ("json", {"path": ref.uri, "type": "save_weights_for_sampler"})
            # save_weights_and_get_sampling_client: the weights as of now, for a sampler of its own.
            sampler_id = f"{sid}:sample:{n if n is not None else uuid.uuid4().hex[:8]}"
            directory = self.store.root / t.model_id / "ephemeral" / sampler_id.rsplit(":", 1)[1]
            lora.save_state(t, directory, optimizer=False, kind="ephemeral")
            self._add_sampler(Sampler(sampler_id, t.base_ref, directory, None), sid)
            return ("json", {"sampling_session_id": sampler_id, "type": "save_weights_for_sampler"})
        return self._training(body, run, "save_weights_for_sampler")

    # -- sampling -----------------------------------------------------------------------------------

    def _add_sampler(self, s: Sampler, sid: str) -> None:
        with self._lock:
            self.samplers[s.sampler_id] = s
            if sid in self.sessions:
                self.sessions[sid]["samplers"].append(s.sampler_id)
            self._record_samplers()

    def _record_samplers(self) -> None:  # under self._lock
        self.store.record_samplers({k: {"base": v.base, "adapter_dir": str(v.adapter_dir) if v.adapter_dir else None,
                                        "model_path": v.model_path} for k, v in self.samplers.items()})

    def create_sampling_session(self, body: dict[str, Any]) -> dict[str, Any]:
        sid = fields.session_id(body)
        self.session(sid)
        sampler_id = f"{sid}:sample:{fields.whole(body, 'sampling_session_seq_id', 0, lo=0)}"
        path, base_ref = fields.text(body, "model_path"), fields.text(body, "base_model")
        if path:
            directory = self.store.existing(self.store.parse(path))
            meta = lora.read_state(directory)
            self._add_sampler(Sampler(sampler_id, meta["base_model"], directory, path), sid)
        elif base_ref:
            resolve_base(base_ref, self.runs_root)
            self._add_sampler(Sampler(sampler_id, base_ref, None, None), sid)
        else:
            raise TinkerUserError("create_sampling_session needs model_path (tinker://...) or base_model")
        return {"sampling_session_id": sampler_id, "type": "create_sampling_session"}

    def sampler(self, sampler_id: str) -> dict[str, Any]:
        s = self.samplers.get(sampler_id)
        if s is None:
            raise TinkerUserError(self._unknown_sampler("sampler", sampler_id))
        return {"sampler_id": s.sampler_id, "base_model": s.base, "model_path": s.model_path}

    def sample(self, body: dict[str, Any]) -> tuple[str, list[str]]:
        """Queue a sample; its fields are checked at once, the sampling parameters by the OpenAI
        routes' rules (a bad one raises :class:`TinkerUserError`: the route's 400, nothing queued)."""
        sampler_id = fields.text(body, "sampling_session_id")
        n, sampling = read_sampling(body)
        seq = fields.whole(body, "seq_id")
        prompt = prompt_tokens(fields.obj(body, "prompt"))
        last_n = fields.whole(body, "prompt_logprobs_last_n")
        with_prompt = fields.flag(body, "prompt_logprobs")
        topk, topk_sample = (fields.whole(body, k, 0, lo=0) or 0 for k in ("topk_prompt_logprobs", "topk_sample_logprobs"))
        ids = [f"{sampler_id}:{seq}:{i}" for i in range(n)]
        s = self.samplers.get(sampler_id)
        if s is None:
            return self.failed(self._unknown_sampler("sampling_session_id", sampler_id)), ids
        asked = [k for k in ("prompt_alt_tokens_k",)
                 if body.get(k)] + (["target_prompt_logprobs"] if body.get("target_prompt_logprobs") else [])
        if asked:
            return self.failed(f"sample with {', '.join(asked)}: not supported by this server (the log-probabilities "
                               "of sampled tokens and of the prompt are)"), ids

        def run() -> Any:
            if self.samplers.get(sampler_id) is not s:  # its checkpoint was deleted while this waited
                raise TinkerUserError(f"sampling_session_id {sampler_id!r}: its checkpoint was deleted; create a "
                                      "sampler from another checkpoint")
            base = self.base(s.base)
            adapter = self._sampler_adapter(base, s)
            sequences, prompt_lp, prompt_topk = sampling_of.sample(base, adapter, prompt, n, with_end_of_text(
                sampling, base), with_prompt, topk, topk_sample)
            if last_n is not None:  # the last N positions only, for the log-probabilities and the top-k alike
                keep = max(last_n, 0)
                prompt_lp = None if prompt_lp is None else [None if i < len(prompt_lp) - keep else v
                                                            for i, v in enumerate(prompt_lp)]
                prompt_topk = None if prompt_topk is None else [None if i < len(prompt_topk) - keep else v
                                                                for i, v in enumerate(prompt_topk)]
            return ("proto", wire.sample_response(sequences, prompt_lp, prompt_topk))

        once = (sampler_id, seq) if seq is not None else None
        return self.work.submit(sampler_id, self._run(run), None, once=once), ids

    def _sampler_adapter(self, base: Base, s: Sampler) -> str | None:
        if s.adapter_dir is None:
            return None
        key = str(s.adapter_dir)
        if key not in base.samplers:
            if not (s.adapter_dir / "adapter_config.json").is_file():
                # Removed behind the server's back (the API's delete drops the sampler too).
                raise TinkerUserError(f"sampler {s.sampler_id!r}: its weights ({s.model_path or s.adapter_dir}) are no "
                                      "longer on disk: create a sampler from a checkpoint that exists")
            name = f"sp_{next(self._names)}"
            base.load(name, s.adapter_dir)
            base.samplers[key] = name
            while len(base.samplers) > LOADED_SAMPLERS:
                base.drop(next(iter(base.samplers.values())))
        return base.samplers[key]

    def delete_checkpoint(self, path: str) -> None:
        """Delete checkpoint ``path`` and the samplers made from it: they would sample from weights
        no longer on disk (once their cached adapter is evicted), so they go with it and a later
        request to one is refused as an unknown sampler."""
        directory = self.store.existing(self.store.parse(path))
        with self._lock:
            gone = [k for k, v in self.samplers.items() if v.adapter_dir == directory]
            for k in gone:
                del self.samplers[k]
                self._dropped[k] = path
            self._record_samplers()
        self.store.delete(self.store.parse(path))
        if gone:
            log.info("checkpoint %s deleted, and its samplers %s", path, ", ".join(gone))
            # On the worker, which alone touches the models: a checkpoint saved again under the same
            # name must load afresh, not find the deleted one's adapter still cached.
            self.work.submit("delete", lambda: self._forget_adapter(str(directory)))

    def _unknown_sampler(self, field: str, sampler_id: str) -> str:
        """Why a sampler id is not here: its checkpoint was deleted in this server's life, or it
        never was one of this server's."""
        deleted = self._dropped.get(sampler_id)
        if deleted is not None:
            return (f"{field} {sampler_id!r} was made from checkpoint {deleted}, deleted since (its samplers went "
                    "with it): create a sampler from a checkpoint that exists")
        return f"{field} {sampler_id!r} is not known to this server"

    def _forget_adapter(self, key: str) -> None:
        for base in self.bases.values():
            if key in base.samplers:
                base.drop(base.samplers[key])

    # -- lookups (the RestClient's) -----------------------------------------------------------------

    def training_run(self, model_id: str) -> dict[str, Any]:
        record = self.store.model_record(model_id)
        if record is None:
            raise TinkerUserError(f"training run {model_id!r} is not known to this server")
        ckpts = self.store.checkpoints(model_id)
        last = lambda kind: next((c for c in reversed(ckpts) if c["checkpoint_type"] == kind), None)  # noqa: E731
        return {"training_run_id": model_id, "base_model": record["base_model"], "model_owner": "local",
                "is_lora": True, "lora_rank": record["lora"]["rank"], "corrupted": False,
                "last_request_time": record.get("created") or now(), "last_checkpoint": last("training"),
                "last_sampler_checkpoint": last("sampler"), "user_metadata": {}}

    def weights_info(self, path: str) -> dict[str, Any]:
        meta = lora.read_state(self.store.existing(self.store.parse(path)))
        spec = meta["lora"]
        return {"base_model": meta["base_model"], "is_lora": True, "lora_rank": spec["rank"],
                "train_unembed": spec["train_unembed"], "train_mlp": spec["train_mlp"],
                "train_attn": spec["train_attn"], "optimizer_config": {"type": "adamw"}}


