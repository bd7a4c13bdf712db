"""`runs show --plot`: one panel per curve people look at, with the resume points marked."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from clustertune.cli.main import main  # noqa: E402
from clustertune.runs import report  # noqa: E402
from clustertune.runs.run import Run  # noqa: E402
from clustertune.runs.state import RunState  # noqa: E402


def resumed_run(root: Path) -> Run:
    """A run stopped at step 4 and resumed from its step-4 checkpoint, with real-shaped metrics."""
    run = Run.create(root, "tiny", "causal_lm", "task: causal_lm\n", ["clustertune", "run", "tiny.yaml"])
    run.start_attempt()
    run.transition(RunState.PREEMPTED, reason="stop request (SIGTERM); checkpoint written")
    run.start_attempt(resumed_from="step-00000004")
    run.transition(RunState.COMPLETED)
    rows = [{"kind": "eval", "step": 0, "eval_loss": 6.2, "eval_perplexity": 493.0}]
    for step in (2, 4, 6, 8):
        rows.append({"kind": "train", "step": step, "loss": 6.0 - step / 10, "lr": 1e-3 * (1 - step / 8),
                     "grad_norm": 1.0 / step, "tokens_per_s": 1000.0 + step})
        if step % 4 == 0:
            rows.append({"kind": "eval", "step": step, "eval_loss": 6.0 - step / 8, "eval_perplexity": 400.0 - step})
    run.paths.metrics.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run


def test_panels_and_resume_marks(tmp_path: Path) -> None:
    run = resumed_run(tmp_path)
    assert report.resume_steps(run) == [4]
    fig = report.curves_figure(run, plt)
    panels = {ax.get_title(): ax for ax in fig.axes if ax.get_visible()}
    assert set(panels) == {"loss", "perplexity", "learning rate", "tokens/s", "gradient norm"}
    for title, ax in panels.items():
        marks = [ln for ln in ax.get_lines() if ln.get_label() == "resumed"]
        assert len(marks) == 1 and list(marks[0].get_xdata()) == [4, 4], title
    labels = {ln.get_label() for ln in panels["loss"].get_lines()}
    assert {"train loss", "eval loss"} <= labels
    (grad,) = [ln for ln in panels["gradient norm"].get_lines() if ln.get_label() != "resumed"]
    assert list(grad.get_xdata()) == [2, 4, 6, 8]
    plt.close(fig)


def test_shares_are_drawn_on_the_whole_0_to_1_scale(tmp_path: Path) -> None:
    run = Run.create(tmp_path, "cls", "sequence_classification", "task: sequence_classification\n", ["x"])
    rows = [{"kind": "train", "step": s, "loss": 1.0 / s, "lr": 1e-3, "grad_norm": 1.0, "tokens_per_s": 10.0}
            for s in (1, 2)]
    rows += [{"kind": "eval", "step": s, "eval_loss": 1.0 / s, "eval_accuracy": a} for s, a in ((1, 0.41), (2, 0.43))]
    run.paths.metrics.write_text("".join(json.dumps(r) + "\n" for r in rows))
    fig = report.curves_figure(run, plt)
    panels = {ax.get_title(): ax for ax in fig.axes if ax.get_visible()}
    assert panels["accuracy"].get_ylim() == (-0.02, 1.02)  # 0.41 -> 0.43 is not drawn as a leap
    assert panels["loss"].get_ylim() != (-0.02, 1.02)
    plt.close(fig)


def test_runs_show_plot_writes_the_png(tmp_path: Path, capsys) -> None:
    run = resumed_run(tmp_path)
    assert main(["runs", "show", run.id, "--plot", "--runs-root", str(tmp_path)]) == 0
    assert f"plot      {run.paths.plot}" in capsys.readouterr().out
    assert run.paths.plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
