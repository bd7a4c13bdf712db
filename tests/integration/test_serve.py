"""`clustertune serve` against OpenAI's own Python client: answers equal `clustertune generate`'s,
streaming or not; seeded answers repeat; log-probabilities are the model's; bad requests get
OpenAI's error shape and status; the key is enforced; concurrent streams each equal their answer
alone; a client that leaves frees its place; a full line answers 429; the CLI serves until SIGTERM.

The servers run in threads of the test process (one per module, the model loaded once), on
tiny seeded models: a chat model (ChatML in its tokenizer) and the same model without a template.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import openai
import pytest

from clustertune.api import serving
from clustertune.cli.main import main
from clustertune.use.generate import Generator, Sampling
from clustertune.use.load import load_for_use

KEY = "sk-test-0123"
QUESTIONS = ["Which keyword starts a loop?", "What does def define?", "hi", "Count to three.",
             "And class?", "Backwards?", "Thanks!", "What is a tuple?"]


class Running:
    def __init__(self, server: Any):
        self.server = server
        self.thread = threading.Thread(target=server.run, daemon=True)
        self.thread.start()
        assert server.wait_loaded(120), server.engine.failed

    @property
    def url(self) -> str:
        return self.server.served.base_url

    @property
    def model(self) -> str:
        return self.server.served.model_id

    def client(self, key: str | None = KEY) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.url, api_key=key or "none", max_retries=0, timeout=120)

    def stop(self) -> None:
        self.server.stop()
        self.thread.join(30)
        assert not self.thread.is_alive(), "the server did not stop"


@pytest.fixture(scope="module")
def chat_server(chat_base: Path) -> Iterator[Running]:
    r = Running(serving.start(str(chat_base), port=0, api_key=KEY, device="cpu", dtype="fp32"))
    yield r
    r.stop()


@pytest.fixture(scope="module")
def plain_server(plain_base: Path) -> Iterator[Running]:
    # One place and no waiting line: the tests of leaving and of a full line need it small.
    r = Running(serving.start(str(plain_base), port=0, device="cpu", dtype="fp32",
                              limits=serving.Limits(running=1, waiting=0, max_tokens=16)))
    yield r
    r.stop()


@pytest.fixture(scope="module")
def chat_gen(chat_base: Path) -> Generator:
    return Generator(load_for_use(str(chat_base), device="cpu", dtype="fp32"))


@pytest.fixture(scope="module")
def plain_gen(plain_base: Path) -> Generator:
    return Generator(load_for_use(str(plain_base), device="cpu", dtype="fp32"))


def greedy(gen: Generator, prompt: str, n: int) -> str:
    return gen.complete([prompt], Sampling(temperature=0, max_new_tokens=n))[0]


def ask(q: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": q}]


def answer_once_loaded(c: openai.OpenAI, model: str, question: str, max_tokens: int = 8) -> str | None:
    """A greedy answer from a server started elsewhere, which loads its model after it listens
    (503 until then)."""
    deadline = time.monotonic() + 120
    while True:
        try:
            r = c.chat.completions.create(model=model, messages=ask(question), temperature=0, max_tokens=max_tokens)
            return r.choices[0].message.content
        except openai.APIStatusError as exc:
            assert exc.status_code == 503 and time.monotonic() < deadline, exc
            time.sleep(0.3)


@pytest.mark.smoke  # one end-to-end check of this backend in `scripts/test.sh --fast`
def test_a_chat_answer_equals_generate_streamed_or_not(chat_server: Running, chat_gen: Generator) -> None:
    c = chat_server.client()
    assert [m.id for m in c.models.list().data] == [chat_server.model]
    want = greedy(chat_gen, QUESTIONS[0], 12)
    r = c.chat.completions.create(model=chat_server.model, messages=ask(QUESTIONS[0]), temperature=0, max_tokens=12)
    assert r.choices[0].message.content == want and r.choices[0].message.role == "assistant"
    prompt_tokens = len(chat_gen.encode(QUESTIONS[0]))
    assert r.usage.prompt_tokens == prompt_tokens and 0 < r.usage.completion_tokens <= 12
    assert r.choices[0].finish_reason == ("length" if r.usage.completion_tokens == 12 else "stop")

    stream = c.chat.completions.create(model=chat_server.model, messages=ask(QUESTIONS[0]), temperature=0,
                                       max_tokens=12, stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == want
    assert [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason] == [
        r.choices[0].finish_reason]
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens == r.usage.total_tokens


def test_a_completion_continues_plain_text_as_generate_does(plain_server: Running, plain_gen: Generator) -> None:
    c = plain_server.client()
    r = c.completions.create(model=plain_server.model, prompt="def main():", temperature=0, max_tokens=10)
    assert r.choices[0].text == greedy(plain_gen, "def main():", 10)
    streamed = "".join(ch.choices[0].text for ch in c.completions.create(
        model=plain_server.model, prompt="def main():", temperature=0, max_tokens=10, stream=True) if ch.choices)
    assert streamed == r.choices[0].text
    # a model without a chat template has no conversations to answer
    with pytest.raises(openai.BadRequestError, match="no chat template") as e:
        c.chat.completions.create(model=plain_server.model, messages=ask("hi"))
    assert e.value.body["param"] == "messages"


def test_a_seed_repeats_n_answers_and_logprobs_are_the_models(chat_server: Running) -> None:
    c = chat_server.client()

    def sample(seed: int) -> list[str]:
        r = c.chat.completions.create(model=chat_server.model, messages=ask("hi"), temperature=1.0, n=2, seed=seed,
                                      max_tokens=8)
        assert [ch.index for ch in r.choices] == [0, 1]
        return [ch.message.content for ch in r.choices]

    first = sample(7)
    assert first == sample(7) and first != sample(8)
    r = c.chat.completions.create(model=chat_server.model, messages=ask("hi"), temperature=0, max_tokens=6,
                                  logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert content and all(len(t.top_logprobs) == 3 and t.logprob <= 0 for t in content)
    # greedy: the drawn token is the most likely one
    assert all(abs(t.logprob - t.top_logprobs[0].logprob) < 1e-5 for t in content)


def test_bad_requests_get_openai_errors_naming_the_field(chat_server: Running, chat_gen: Generator) -> None:
    c = chat_server.client()
    m = chat_server.model
    cases: list[tuple[dict[str, Any], type[Exception], str | None]] = [
        ({"temperature": 5}, openai.BadRequestError, "temperature"),
        ({"n": 0}, openai.BadRequestError, "n"),
        ({"max_tokens": -3}, openai.BadRequestError, "max_tokens"),
        ({"stop": ["a", "b", "c", "d", "e"]}, openai.BadRequestError, "stop"),
        ({"top_logprobs": 2}, openai.BadRequestError, "top_logprobs"),
        ({"presence_penalty": 1.0}, openai.BadRequestError, "presence_penalty"),
        ({"seed": -1}, openai.BadRequestError, "seed"),
        ({"logit_bias": {"5": 10}}, openai.BadRequestError, "logit_bias"),
        ({"model": "gpt-4o"}, openai.NotFoundError, "model"),
    ]
    for extra, err, param in cases:
        kwargs = {"model": m, "messages": ask("hi"), **extra}
        with pytest.raises(err) as e:
            c.chat.completions.create(**kwargs)
        assert e.value.body["param"] == param, (extra, e.value.body)
        assert e.value.body["message"] and e.value.body["type"]
    with pytest.raises(openai.BadRequestError, match=r"messages\[0\]\.role"):
        c.chat.completions.create(model=m, messages=[{"role": "robot", "content": "hi"}])
    with pytest.raises(openai.APIStatusError) as e:  # longer than the model's 128 positions
        c.chat.completions.create(model=m, messages=ask("word " * 200))
    assert e.value.status_code == 413 and e.value.body["code"] == "context_length_exceeded"
    # a body that is not JSON, straight over HTTP
    req = urllib.request.Request(chat_server.url + "/chat/completions", data=b"{not json", method="POST",
                                 headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as h:
        urllib.request.urlopen(req, timeout=30)
    assert h.value.code == 400 and "not JSON" in json.loads(h.value.read())["error"]["message"]


def test_the_api_key_is_required_as_bearer_or_x_api_key(chat_server: Running) -> None:
    with pytest.raises(openai.AuthenticationError):
        chat_server.client("sk-wrong").models.list()

    def get(headers: dict[str, str]) -> int:
        try:
            with urllib.request.urlopen(urllib.request.Request(chat_server.url + "/models", headers=headers),
                                        timeout=30) as resp:
                return resp.status
        except urllib.error.HTTPError as exc:
            return exc.code

    assert get({}) == 401 and get({"X-API-Key": KEY}) == 200 and get({"Authorization": f"Bearer {KEY}"}) == 200
    # health answers without a key: load balancers and `status` ask it
    base = chat_server.url.removesuffix("/v1")
    with urllib.request.urlopen(base + "/health", timeout=30) as resp:
        assert json.loads(resp.read())["status"] == "ok"


def test_concurrent_streams_each_equal_their_answer_alone(chat_server: Running, chat_gen: Generator) -> None:
    want = {q: greedy(chat_gen, q, 10) for q in QUESTIONS}
    c = chat_server.client()

    def stream(q: str) -> str:
        s = c.chat.completions.create(model=chat_server.model, messages=ask(q), temperature=0, max_tokens=10,
                                      stream=True)
        return "".join(ch.choices[0].delta.content or "" for ch in s if ch.choices)

    with ThreadPoolExecutor(len(QUESTIONS)) as pool:
        got = dict(zip(QUESTIONS, pool.map(stream, QUESTIONS)))
    assert got == want


def test_greedy_and_sampled_requests_in_one_batch_each_get_what_they_asked(chat_server: Running,
                                                                           chat_gen: Generator) -> None:
    want = greedy(chat_gen, QUESTIONS[0], 10)
    c = chat_server.client()

    def answer(settings: dict[str, float]) -> str:
        r = c.chat.completions.create(model=chat_server.model, messages=ask(QUESTIONS[0]), max_tokens=10, **settings)
        return r.choices[0].message.content or ""

    # Batched together: greedy ones, sampled ones whose nucleus is the most likely token alone
    # (so they answer greedily too), and sampled ones from the whole distribution at temperature 2.
    asks = [{"temperature": 0.0}] * 3 + [{"temperature": 1.5, "top_p": 1e-6}] * 3 + [{"temperature": 2.0}] * 3
    with ThreadPoolExecutor(len(asks)) as pool:
        got = list(pool.map(answer, asks))
    assert got[:6] == [want] * 6
    assert any(g != want for g in got[6:]), "temperature 2 answered greedily three times"


def _wait_idle(server: Running) -> None:
    deadline = time.monotonic() + 30
    while server.server.engine.busy and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.server.engine.busy == 0, "the place of a finished request was never given back"


def test_a_client_that_leaves_frees_its_place_and_a_full_line_is_429(plain_server: Running) -> None:
    c = plain_server.client()
    m = plain_server.model
    engine = plain_server.server.engine
    _wait_idle(plain_server)
    # The batch is held before the stream starts: a stream begun first can draw all its tokens (or
    # its end of text) before the test holds the batch on a loaded machine, and give its place back.
    with engine.paused():
        held = c.completions.create(model=m, prompt="The", temperature=1.0, max_tokens=100, stream=True)
        next(iter(held))  # the stream has begun: its place (the only one) is taken, and no token can come
        assert engine.busy == 1
        with pytest.raises(openai.RateLimitError) as e:
            c.completions.create(model=m, prompt="x", max_tokens=2)
        assert e.value.response.headers.get("retry-after") == "1" and e.value.body["code"] == "queue_full"
        held.close()  # the client goes away mid-stream
        _wait_idle(plain_server)  # its place is given back although its answer never ended
    r = c.completions.create(model=m, prompt="x", temperature=0, max_tokens=2)
    assert r.choices[0].finish_reason in ("stop", "length")


def test_requests_before_the_model_is_loaded_get_503(plain_base: Path) -> None:
    gate = threading.Event()
    server = serving.start(str(plain_base), port=0, device="cpu", dtype="fp32")
    real = server.engine._load_fn
    server.engine._load_fn = lambda: (gate.wait(60), real())[1]  # loading held until the test lets it go
    t = threading.Thread(target=server.run, daemon=True)
    t.start()
    try:
        c = openai.OpenAI(base_url=server.served.base_url, api_key="x", max_retries=0)
        deadline = time.monotonic() + 30
        while True:  # until uvicorn listens
            try:
                c.completions.create(model=server.served.model_id, prompt="x", max_tokens=1)
                raise AssertionError("answered before the model loaded")
            except openai.APIConnectionError:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            except openai.APIStatusError as exc:
                assert exc.status_code == 503 and exc.response.headers.get("retry-after")
                break
        gate.set()
        assert server.wait_loaded(60)
        assert c.completions.create(model=server.served.model_id, prompt="x", max_tokens=1).choices
    finally:
        gate.set()
        server.stop()
        t.join(30)


def test_bad_serve_options_exit_2_before_anything_listens(plain_base: Path, chat_server: Running,
                                                          tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    port = int(chat_server.url.rsplit(":", 1)[1].split("/")[0])
    cases = [
        (["serve", str(tmp_path / "nope")], "no such directory"),
        (["serve", "no-such-run", "--runs-root", str(tmp_path)], "no-such-run"),
        (["serve", str(plain_base), "--port", str(port)], "cannot listen there"),
        (["serve", str(plain_base), "--port", "70000"], "--port 70000"),
        (["serve", str(plain_base), "--max-running", "0"], "--max-running 0"),
        (["serve", str(plain_base), "--api-key", " "], "--api-key"),
        (["serve", str(plain_base), "--device", "cuda:0"], "--device cuda:0"),
        (["serve", str(plain_base), "--dtype", "fp64"], "--dtype 'fp64'"),
        (["serve", str(plain_base), "--template", str(tmp_path / "nope.jinja")], "--template"),
        (["serve", str(plain_base), "--adapters", " , "], "--adapters ' , '"),
        (["serve", str(plain_base), "--adapters", "no-such-run", "--runs-root", str(tmp_path)], "no-such-run"),
        (["serve", str(plain_base), "--max-adapters", "0"], "--max-adapters 0"),
        (["serve", str(plain_base), "launch.backend=slurm", "--adapters", "x"], "--adapters and --max-adapters"),
    ]
    for argv, words in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err, (argv, err)


def test_the_cli_serves_until_sigterm(plain_base: Path) -> None:
    exe = Path(sys.executable).with_name("clustertune")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([str(exe), "serve", str(plain_base), "--port", "0", "--device", "cpu"],
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stderr.readline()
        url = re.search(r"at (http://\S+/v1)", line)
        assert url, line
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(url.group(1).removesuffix("/v1") + "/health", timeout=10) as resp:
                    if json.loads(resp.read())["status"] == "ok":
                        break
            except urllib.error.HTTPError as exc:
                assert exc.code == 503
            assert time.monotonic() < deadline and proc.poll() is None, "the server never became ready"
            time.sleep(0.2)
        r = openai.OpenAI(base_url=url.group(1), api_key="x", max_retries=0).completions.create(
            model=plain_base.name, prompt="x", max_tokens=2, temperature=0)
        assert r.model == plain_base.name and r.choices
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        # What a person sees: the lines the server says, not the libraries' loading bars.
        rest = proc.stderr.read()
        assert f"serving {plain_base.name} at" in rest and "Loading weights" not in rest, rest
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.usefixtures("slurm_cluster")
def test_served_as_a_slurm_job_reached_by_the_openai_client_and_cancelled(chat_base: Path, runs_root: Path,
                                                                           chat_gen: Generator) -> None:
    from tests.helpers import cli

    out = cli("serve", str(chat_base), "launch.backend=slurm", "launch.cpus_per_task=1", "--device", "cpu",
              "--dtype", "fp32", timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    url = re.search(r"at (http://\S+/v1) \(node (\S+)\)", out.stdout)
    run_id = re.search(r"^run (\S+): serving", out.stdout, re.M)
    assert url and run_id, out.stdout
    assert "ssh -N -L 8000:127.0.0.1:" in out.stdout and url.group(2) in out.stdout
    run_dir = runs_root / run_id.group(1)
    assert json.loads((run_dir / "serve.json").read_text())["base_url"] == url.group(1)

    status = cli("status", run_id.group(1))
    assert "RUNNING" in status.stdout, status.stdout + status.stderr
    c = openai.OpenAI(base_url=url.group(1), api_key="x", max_retries=0, timeout=60)
    assert answer_once_loaded(c, chat_base.name, QUESTIONS[1]) == greedy(chat_gen, QUESTIONS[1], 8)

    assert cli("cancel", run_id.group(1)).returncode == 0
    deadline = time.monotonic() + 120
    while json.loads((run_dir / "run.json").read_text())["state"] not in ("CANCELLED", "COMPLETED", "FAILED"):
        assert time.monotonic() < deadline, (run_dir / "run.json").read_text()
        time.sleep(0.5)
    assert json.loads((run_dir / "run.json").read_text())["state"] == "CANCELLED"
    with pytest.raises(openai.APIConnectionError):  # the port is closed with the job
        c.models.list()


def test_served_on_an_ssh_host_through_a_forward_and_cancelled(chat_base: Path, ssh_cluster: Any, sshd_service: Any,
                                                               chat_gen: Generator, tmp_path: Path) -> None:
    import queue
    import socket

    from tests.helpers import cli

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    exe = Path(sys.executable).with_name("clustertune")
    proc = subprocess.Popen([str(exe), "serve", str(chat_base), "launch.backend=ssh", "launch.cluster=loop",
                             f"launch.site_packages_from={sys.executable}", "--device", "cpu", "--dtype", "fp32",
                             "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"})
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout], daemon=True).start()
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 180
        while not any(" serving " in x for x in seen):
            assert time.monotonic() < deadline and proc.poll() is None, "".join(seen)
            try:
                seen.append(lines.get(timeout=1))
            except queue.Empty:
                pass
        head = "".join(seen)
        found = re.search(r"^run (\S+): serving (\S+) at (http://127\.0\.0\.1:(\d+)/v1) \(forwarded to (\S+):(\d+)\)",
                          head, re.M)
        assert found and int(found.group(4)) == port and found.group(2) == chat_base.name, head
        run_id, host_port = found.group(1), int(found.group(6))
        c = openai.OpenAI(base_url=found.group(3), api_key="x", max_retries=0, timeout=60)
        assert answer_once_loaded(c, chat_base.name, QUESTIONS[1]) == greedy(chat_gen, QUESTIONS[1], 8)
        # The model went as a content-addressed snapshot into the host's root, not its run directory.
        roots = [h.root / tmp_path.name for h in sshd_service.hosts]
        assert list((roots[0] / "files").glob(f"*/{chat_base.name}/config.json")), list(roots[0].iterdir())
        assert "RUNNING" in cli("status", run_id).stdout

        assert cli("cancel", run_id).returncode == 0  # from another terminal
        assert proc.wait(120) == 0
        deadline = time.monotonic() + 10
        while not any("CANCELLED" in x for x in seen) and time.monotonic() < deadline:
            try:
                seen.append(lines.get(timeout=0.5))
            except queue.Empty:
                pass
        tail = "".join(seen)
        assert f"run {run_id} CANCELLED" in tail, tail
        with pytest.raises(openai.APIConnectionError):  # the forward is closed
            c.models.list()
        with pytest.raises(OSError):  # and the server's port on the host is free
            socket.create_connection(("127.0.0.1", host_port), timeout=5).close()
    finally:
        if proc.poll() is None:
            proc.kill()
