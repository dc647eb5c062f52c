"""Issue 15 item 1: the DQN workload's display phase (--display-every) and convolution paths (--conv-impl).

The two convolution paths of one module give the same outputs and gradients; a real capture records the
display phase on exactly the asked steps and writes both settings and the measured cost to the meta;
bad values are one line, exit 2.
"""

from __future__ import annotations

import importlib.util
import os
import shutil

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.cli import main
from archsim.trace import load
from workloads.dqn.model import CONV_LAYERS, NatureDQN, unfold_conv2d

HAVE_DISPLAY = bool(os.environ.get("DISPLAY")) or shutil.which("Xvfb") is not None
HAVE_PYGAME = importlib.util.find_spec("pygame") is not None
needs_display = pytest.mark.skipif(
    not (HAVE_DISPLAY and HAVE_PYGAME),
    reason="needs pygame and a display (DISPLAY set, or Xvfb: apt-get install xvfb; scripts/setup.sh "
    "installs it where apt runs as root)",
)
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
# float32 sums of up to 4*8*8 = 256 products reordered (GEMM vs direct/Winograd kernels)
ATOL = 1e-4
RTOL = 1e-4


def _twin_networks(device: str) -> tuple[NatureDQN, NatureDQN]:
    torch.manual_seed(0)
    library = NatureDQN(6, conv_impl="cudnn").to(device)
    unfold = NatureDQN(6, conv_impl="unfold").to(device)
    unfold.load_state_dict(library.state_dict())  # same parameters, other forward path
    return library, unfold


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("batch", [1, 32])
def test_unfold_and_library_networks_agree_in_outputs_and_gradients(device, batch):
    library, unfold = _twin_networks(device)
    frames = torch.randint(0, 256, (batch, 4, 84, 84), dtype=torch.uint8, device=device)
    q_lib, q_unf = library(frames), unfold(frames)
    torch.testing.assert_close(q_unf, q_lib, atol=ATOL, rtol=RTOL)
    upstream = torch.randn_like(q_lib)
    (q_lib * upstream).sum().backward()
    (q_unf * upstream).sum().backward()
    named_unf = dict(unfold.named_parameters())
    for name, param in library.named_parameters():
        assert named_unf[name].grad is not None, name
        torch.testing.assert_close(named_unf[name].grad, param.grad, atol=ATOL, rtol=RTOL)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layer", range(len(CONV_LAYERS)))
def test_each_nature_layer_unfold_matches_conv2d_including_input_gradient(device, layer):
    out_channels, kernel, stride = CONV_LAYERS[layer]
    in_channels, size = [(4, 84), (32, 20), (64, 9)][layer]  # the Nature network's layer inputs
    gen = torch.Generator().manual_seed(layer)
    x = torch.randn(32, in_channels, size, size, generator=gen).to(device).requires_grad_()
    w = torch.randn(out_channels, in_channels, kernel, kernel, generator=gen).to(device)
    b = torch.randn(out_channels, generator=gen).to(device)
    w.requires_grad_()
    b.requires_grad_()
    ref = F.conv2d(x, w, b, stride=stride)
    got = unfold_conv2d(x, w, b, stride)
    assert got.shape == ref.shape
    scale = float(ref.detach().abs().max())  # inputs are N(0,1), so outputs reach ~sqrt(fan-in)
    torch.testing.assert_close(got, ref, atol=ATOL * scale, rtol=RTOL)
    upstream = torch.randn(ref.shape, generator=gen).to(device)
    grads_ref = torch.autograd.grad((ref * upstream).sum(), (x, w, b))
    grads_got = torch.autograd.grad((got * upstream).sum(), (x, w, b))
    for g_got, g_ref in zip(grads_got, grads_ref, strict=True):
        torch.testing.assert_close(g_got, g_ref, atol=ATOL * float(g_ref.abs().max()), rtol=RTOL)


@settings(max_examples=25, deadline=None)
@given(
    batch=st.integers(1, 3),
    in_channels=st.integers(1, 4),
    out_channels=st.integers(1, 5),
    kernel=st.integers(1, 4),
    stride=st.integers(1, 3),
    extra=st.integers(0, 6),
    seed=st.integers(0, 2**16),
)
def test_unfold_conv_equals_conv2d_for_any_valid_shape(
    batch, in_channels, out_channels, kernel, stride, extra, seed
):
    gen = torch.Generator().manual_seed(seed)
    size = kernel + extra
    x = torch.randn(batch, in_channels, size, size, generator=gen, dtype=torch.float64)
    w = torch.randn(out_channels, in_channels, kernel, kernel, generator=gen, dtype=torch.float64)
    b = torch.randn(out_channels, generator=gen, dtype=torch.float64)
    torch.testing.assert_close(unfold_conv2d(x, w, b, stride), F.conv2d(x, w, b, stride=stride))
    torch.testing.assert_close(unfold_conv2d(x, w, None, stride), F.conv2d(x, w, stride=stride))


def test_switching_the_path_keeps_the_weights():
    library, _ = _twin_networks("cpu")
    before = {k: v.clone() for k, v in library.state_dict().items()}
    frames = torch.randint(0, 256, (2, 4, 84, 84), dtype=torch.uint8)
    q_lib = library(frames)
    library.set_conv_impl("unfold")
    torch.testing.assert_close(library(frames), q_lib, atol=ATOL, rtol=RTOL)
    for key, value in library.state_dict().items():
        assert torch.equal(value, before[key]), key
    with pytest.raises(ValueError, match="conv_impl"):
        library.set_conv_impl("winograd")


@needs_display
def test_game_display_shows_the_screen_and_stops_its_x_server():
    from workloads.dqn.display import GameDisplay

    display_before = os.environ.get("DISPLAY")
    screen = GameDisplay(every=2, screen_shape=(210, 160))
    try:
        import pygame

        rng = np.random.default_rng(0)
        for _ in range(3):
            rgb = rng.integers(0, 256, (210, 160, 3), dtype=np.uint8)
            screen.draw(rgb)
            # what the window holds is the frame drawn (pixel round trip through the surface)
            shown = pygame.surfarray.array3d(pygame.display.get_surface()).swapaxes(0, 1)
            np.testing.assert_array_equal(shown, rgb)
        assert [t for t in range(7) if screen.due(t)] == [0, 2, 4, 6]
        cost = screen.cost()
        assert cost["display_frames"] == 3
        assert cost["display_ms_per_frame"] > 0 and cost["display_cpu_ms_per_frame"] >= 0
    finally:
        screen.close()
    assert os.environ.get("DISPLAY") == display_before  # a started Xvfb is gone, DISPLAY restored


SKIP_FIRST, WARMUP = 5, 1  # first recorded agent step: t = 6, a multiple of 3
ARGS = [
    "capture", "dqn", "--steps", "36", "--learn-start", "8", "--target-period", "3",
    "--replay-capacity", "200", "--seed", "1", "--skip-first", str(SKIP_FIRST), "--wait", "0",
    "--warmup", str(WARMUP), "--active", "30", "--repeat", "1",
]  # fmt: skip


@needs_display
def test_capture_records_display_every_third_step_and_writes_both_settings(tmp_path):
    out = tmp_path / "dqn"
    assert main([*ARGS, "--display-every", "3", "--conv-impl", "unfold", "--out", str(out)]) == 0
    trace = load(out)
    actor = trace.steps[trace.steps.role == "actor"].sort_values("start_us")
    assert len(actor) == 30
    # one actor step per agent step, recorded from t = SKIP_FIRST + WARMUP on (step_id numbers actor
    # and learner steps together, so the agent step index is the actor step's rank in time)
    agent_step = np.arange(len(actor)) + SKIP_FIRST + WARMUP
    drawn = actor.display_us.notna().to_numpy()
    np.testing.assert_array_equal(drawn, agent_step % 3 == 0)
    assert drawn.sum() == 10  # t = 6, 9, ..., 33
    assert (actor.display_us[drawn] > 0).all() and (actor.display_cpu_us[drawn] >= 0).all()
    settings_meta = trace.meta["workload"]["settings"]
    assert settings_meta["display_every"] == 3 and settings_meta["conv_impl"] == "unfold"
    assert settings_meta["display_frames"] == 12  # t = 0, 3, ..., 33, recorded or not
    assert settings_meta["display_ms_per_frame"] > 0
    assert settings_meta["display_cpu_ms_per_frame"] >= 0
    assert settings_meta["display_backend"].startswith("x11")


def test_capture_without_display_records_no_display_phase(tmp_path):
    out = tmp_path / "dqn"
    assert main([*ARGS, "--out", str(out)]) == 0
    trace = load(out)
    assert trace.steps.display_us.isna().all()
    settings_meta = trace.meta["workload"]["settings"]
    assert settings_meta["display_every"] is None and settings_meta["conv_impl"] == "cudnn"
    assert "display_ms_per_frame" not in settings_meta


@pytest.mark.parametrize(
    ("flag", "value", "expected"),
    [
        ("--display-every", "0", "argument --display-every: expected an integer >= 1, got 0"),
        ("--display-every", "-3", "argument --display-every: expected an integer >= 1, got -3"),
        ("--conv-impl", "winograd", "argument --conv-impl: invalid choice: 'winograd'"),
    ],
)
def test_bad_display_or_conv_values_are_one_line_exit_2(capsys, tmp_path, flag, value, expected):
    out = tmp_path / "dqn"
    with pytest.raises(SystemExit) as info:
        main(["capture", "dqn", flag, value, "--out", str(out)])
    assert info.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("archsim: error: capture dqn: ") and expected in lines[0]
    assert not out.exists()
