"""``archsim report``: one self-contained HTML page, opened in a real headless Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from archsim.analysis.limiter import knee, limiter
from archsim.cli import main
from archsim.report.html_page import render_report

ROOT = Path(__file__).resolve().parents[1]
DQN = ROOT / "traces" / "dqn-pong-cpu"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    """A study folder as the demo makes one: a trace, a simulation, a breakdown and a sweep."""
    root = tmp_path_factory.mktemp("study")
    shutil.copytree(DQN, root / "dqn-trace")
    common = ["--hw", "dgx1-v100", "--sim-seconds", "0.1"]
    assert main(["simulate", str(DQN), *common, "--actors", "8", "--out", str(root / "sim")]) == 0
    assert (
        main(
            ["breakdown", str(DQN), "--hw", "dgx1-v100", "--sms", "8,80", "--out", str(root / "bd")]
        )
        == 0
    )
    sweep = ["sweep", str(DQN), *common, "--actors", "2,8,32", "--jobs", "1", "--no-progress"]
    assert main([*sweep, "--out", str(root / "sweep")]) == 0
    return root


def test_page_is_self_contained_and_holds_every_output(study, tmp_path):
    out = tmp_path / "report.html"
    assert main(["report", str(study), "--out", str(out)]) == 0
    page = out.read_text()
    # no network requests and no external scripts or styles
    assert not re.search(r"""(src|href)\s*=\s*["'](https?:|//)""", page)
    assert "<link" not in page and "<script src" not in page
    for title in ("Trace dqn-trace", "Simulation sim", "Breakdown bd", "Sweep sweep"):
        assert title in page
    pngs = list(study.rglob("*.png"))
    assert pngs and page.count("data:image/png;base64,") == len(pngs)
    assert "Limited by" in page and "Resolved hardware config" in page
    assert "dram_bw_gbs" in page  # the resolved config is printed, not just its name


def test_report_refuses_a_folder_without_outputs(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["report", str(tmp_path / "empty"), "--out", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no archsim outputs found" in err[0]
    assert not (tmp_path / "r.html").exists()


def test_text_from_outputs_is_escaped(tmp_path):
    folder = tmp_path / "<img onerror=x>"
    folder.mkdir()
    (folder / "breakdown.csv").write_text("phase,component,seconds\n<script>x</script>,math,1.0\n")
    page = render_report([tmp_path])
    assert "<img onerror=x>" not in page and "&lt;img onerror=x&gt;" in page
    assert "<script>x</script>" not in page and "&lt;script&gt;x&lt;/script&gt;" in page


@pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium on PATH (scripts/setup.sh installs it with apt)"
)
def test_every_chart_renders_in_headless_chromium_without_errors(study, tmp_path):
    out = tmp_path / "report.html"
    assert main(["report", str(study), "--out", str(out)]) == 0
    run = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=5000",
            "--dump-dom",
            out.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    body = re.search(r"<body[^>]*>", run.stdout).group(0)
    charts = int(re.search(r'data-charts="(\d+)"', body).group(1))
    ok = int(re.search(r'data-charts-ok="(\d+)"', body).group(1))
    assert charts == len(list(study.rglob("*.png"))) and ok == charts
    console_errors = [
        line for line in run.stderr.splitlines() if "CONSOLE" in line and "ERROR" in line
    ]
    assert not console_errors, console_errors


def test_limiter_golden_cases():
    assert limiter({"gpu_util": 0.97, "cpu_util": 0.4})[0] == "GPU"
    assert limiter({"gpu_util": 0.2, "cpu_util": 0.95})[0] == "CPU"
    # 10 actors at 4,000 steps/s: 2.5 ms per step each, 2 ms of it waiting (80%)
    waiting = {"gpu_util": 0.3, "cpu_util": 0.3, "actors": 10, "env_steps_per_s": 4000.0}
    waiting["actor_wait_s_per_step"] = 2e-3
    assert limiter({**waiting, "inference_wait_mean_us": 2000.0})[0] == "inference"
    paced = {**waiting, "replay_insert_wait_mean_us": 2000.0, "inference_wait_mean_us": 10.0}
    assert limiter(paced)[0] == "learner pacing"
    # the learner waiting for data (samples wait longer than inserts) is not what limits
    starved = {**paced, "replay_sample_wait_mean_us": 5000.0}
    assert limiter(starved)[0] == "inference"
    # 1 ms of 2.5 ms waiting (40%): the actors mostly work
    assert limiter({**waiting, "actor_wait_s_per_step": 1e-3})[0].startswith("actors")


def test_limiter_of_the_single_loop_names_its_larger_part():
    what, why = limiter({"loop": "sequential", "gpu_util": 0.2, "cpu_util": 0.9})
    assert what == "the single loop" and "CPU work" in why
    assert "GPU work" in limiter({"loop": "sequential", "gpu_util": 0.7, "cpu_util": 0.3})[1]


def test_knee_is_where_doubling_buys_less_than_half():
    actors = [4, 8, 16, 32, 64]
    assert knee(actors, [1, 2, 4, 8, 16]) is None  # perfect scaling
    # 16 -> 32 gains 20% where doubling would gain 100%: the knee is at 16
    assert knee(actors, [1, 2, 4, 4.8, 5.0]) == 16
