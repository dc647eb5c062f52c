"""The simulator on the real SEED-style R2D2 example trace (traces/r2d2-seed-2x2-cpu): recorded
inference batches, LSTM inference priced on the GPU, learner batches counted in sequences."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from archsim.hw import load_hw
from archsim.perf.kernel import predict_op_seconds
from archsim.sim.config import SimConfig
from archsim.sim.recorded import (
    fold_sequence_dims,
    recorded_inference_batch_mean,
    sequence_settings,
    server_overhead_capture_s,
)
from archsim.sim.run import simulate
from archsim.sim.workload import derive_service_times
from archsim.trace import load

TRACE = Path(__file__).resolve().parents[1] / "traces" / "r2d2-seed-2x2-cpu"
SHORT = 0.5  # simulated seconds: hundreds of inference batches at these sizes


@pytest.fixture(scope="module")
def trace():
    return load(TRACE)


@pytest.fixture(scope="module")
def v100():
    return load_hw("dgx1-v100")


def test_metrics_report_the_recorded_mean_batch(trace, v100):
    rows = trace.steps[trace.steps["role"] == "inference"]
    # The capture's 69 recorded batches: 67 of 4 observations (2 actors x 2 envs) and 2 of 2, so
    # the mean is (67 x 4 + 2 x 2) / 69 = 272 / 69 = 3.942...
    assert sorted(rows["batch_size"].value_counts().items()) == [(2, 2), (4, 67)]
    assert recorded_inference_batch_mean(trace) == pytest.approx(272 / 69)
    metrics = simulate(trace, v100, SimConfig(actors=8, sim_seconds=SHORT)).metrics
    assert metrics["recorded_inference_batch_mean"] == pytest.approx(272 / 69)
    assert metrics["inference_batch_mean"] > 0


def test_simulated_batches_grow_with_the_actors(trace, v100):
    means = [
        simulate(trace, v100, SimConfig(actors=n, sim_seconds=SHORT)).metrics[
            "inference_batch_mean"
        ]
        for n in (4, 32, 128)
    ]
    assert means[0] < means[1] < means[2]
    assert means[0] <= 4  # a batch never holds more observations than there are environments


def test_updates_fall_as_the_learner_batch_of_sequences_grows(trace, v100):
    updates = [
        simulate(trace, v100, SimConfig(actors=8, learner_batch=b, sim_seconds=SHORT)).metrics[
            "learner_updates_per_s"
        ]
        for b in (2, 16, 64)
    ]
    assert updates[0] > updates[1] > updates[2] > 0


def test_learner_work_grows_per_sequence_including_the_folded_torso(trace, v100):
    config = SimConfig(actors=8)
    small = derive_service_times(trace, v100, config, learner_batch=2).learner_gpu_s
    large = derive_service_times(trace, v100, config, learner_batch=64).learner_gpu_s
    # 32x the sequences: the conv torso (on [batch x steps, ...] tensors) must grow too, so the
    # step grows well beyond what the LSTM alone would add; the GPU runs it wider, so below 32x.
    assert 4 < large / small < 32


def test_fold_sequence_dims_keeps_elements_and_makes_time_major_inputs_batch_major(trace):
    assert sequence_settings(trace) == (20, 10)  # the example's sequence length and burn-in
    ops = pd.DataFrame(
        {
            "input_dims": [
                "[[40,4,84,84],[32,4,8,8],[32]]",  # torso on 2 sequences x 20 steps
                "[[512,20],[20,3136]]",  # weight gradient of 2 x 10 burn-in steps
                "[[2,10,519],[[1,2,512],[1,2,512]]]",  # LSTM: already batch-first
                "[[64]]",  # a bias: its 64 is not 2 x an unroll length (10, 20, 30)
            ]
        }
    )
    folded = fold_sequence_dims(ops, np.full(4, 2), (10, 20, 30))
    shapes = [json.loads(text) for text in folded["input_dims"]]
    assert shapes[0] == [[2, 80, 84, 84], [32, 4, 8, 8], [32]]  # 40 x 4 = 2 x 80
    assert shapes[1] == [[512, 20], [2, 31360]]  # 20 x 3136 = 2 x 31360
    assert shapes[2] == [[2, 10, 519], [[1, 2, 512], [1, 2, 512]]]
    assert shapes[3] == [[64]]


def test_inference_prices_the_lstm_step_on_the_gpu(trace, v100):
    ops = trace.ops[trace.ops["phase"] == "inference_batch"]
    lstm = ops[ops["name"].str.contains("lstm", case=False)]
    assert not lstm.empty
    assert np.all(predict_op_seconds(lstm, v100) > 0)
    times = derive_service_times(trace, v100, SimConfig(actors=64), learner_batch=2)
    gpu = times.inference_gpu_s
    assert gpu[0] == 0 and np.all(gpu[1:] > 0)
    assert np.all(np.diff(gpu[1:]) >= 0)  # a larger batch never finishes sooner


def test_server_pays_the_recorded_per_batch_overhead(trace, v100):
    overhead_s = server_overhead_capture_s(trace)
    rows = trace.steps[trace.steps["role"] == "inference"]
    # Outside the policy's ops, but part of every batch: above zero, below a whole median batch.
    assert 0 < overhead_s < rows["dur_us"].median() * 1e-6
    times = derive_service_times(trace, v100, SimConfig(actors=64), learner_batch=2)
    # The simulator charges that overhead with the profiler's own cost taken out (the capture timed
    # its second half unprofiled), plus one launch per kernel of the batch on the server thread.
    from archsim.sim.profiler_cost import without_profiler_cost

    unprofiled_s = server_overhead_capture_s(without_profiler_cost(trace))
    assert unprofiled_s < overhead_s
    assert times.server_cpu_s_per_batch > unprofiled_s


def test_batches_fill_while_the_server_is_busy_and_both_paths_agree(trace, v100):
    times = derive_service_times(trace, v100, SimConfig(actors=64), learner_batch=2)
    assert times.batch_when_server_free  # a SEED trace: the recorded server takes what waits
    runs = {
        engine: simulate(trace, v100, SimConfig(actors=64, engine=engine, sim_seconds=0.3)).metrics
        for engine in ("fast", "simpy")
    }
    for name in ("frames_per_s", "inference_batch_mean", "learner_updates_per_s"):
        assert runs["fast"][name] == pytest.approx(runs["simpy"][name], rel=1e-9)
    # 64 actors against a server busy ~3 ms per batch: requests pile up while it works, so batches
    # fill to the 64 cap rather than closing on the 1 ms timeout with a handful each.
    assert runs["fast"]["inference_batch_mean"] > 32


def test_lstm_lowering_conserves_the_forward_flops_and_adds_the_trained_backward(trace):
    from archsim.sim.rnn_lowering import lower_lstm_ops

    lstm = trace.ops[trace.ops["op_class"] == "rnn"]
    one = lstm[lstm["input_dims"].str.startswith("[[4,1,519]")].head(1)  # inference, B=4, T=1
    low = lower_lstm_ops(one)
    # T = 1: one input GEMM [4,519]x[519,2048], one recurrent GEMM [4,512]x[512,2048], one cell.
    assert list(low["name"]) == ["lstm_input_gemm", "lstm_recurrent_gemm", "lstm_cell"]
    gemm_flops = 2 * 4 * 519 * 2048 + 2 * 4 * 512 * 2048  # = 8,445,952
    assert low["flops"].sum() == pytest.approx(gemm_flops + 9 * 4 * 512)  # + cell = 8,464,384
    # The ingest's LSTM formula (archsim.trace.flops._rnn_sequence) counts the same work, within 1%.
    assert low["flops"].sum() == pytest.approx(float(one["flops"].iloc[0]), rel=0.01)
    # The trained unroll (B=2, T=20) gets 2 x 20 per-step backward kernels and 3 whole-sequence GEMMs.
    trained = lstm[lstm["input_dims"].str.startswith("[[2,20,519]")].head(1)
    low = lower_lstm_ops(trained, backward_steps=20)
    backward = low[low["phase"] == "train_backward"]
    assert len(low) - len(backward) == 1 + 2 * 20
    assert len(backward) == 2 * 20 + 3
    assert np.all(low["flops"] > 0) and np.all(low["bytes_read"] > 0)


def test_local_inference_is_refused_for_a_central_capture(trace, v100):
    from archsim.errors import ArchsimError

    # The SEED actors never ran the policy: local inference would get it for free.
    with pytest.raises(ArchsimError, match="no act phase"):
        derive_service_times(trace, v100, SimConfig(actors=8, inference="local"), learner_batch=2)


def test_the_learner_batch_copies_single_frames_of_each_sequence(trace):
    from archsim.sim.learner_work import learner_batch_bytes
    from tests.test_sim_support import tiny_trace

    # R2D2 replay holds each sequence's 20 steps (burn-in included) as 84x84 uint8 frames plus the
    # 3 frames before them; the learner stacks them on the device: 2 x 23 x 7,056 B = 324,576 B.
    assert learner_batch_bytes(trace, 2) == 2 * (20 + 4 - 1) * 84 * 84 == 324_576
    # DQN: s and s' per transition, each a 4-frame stack: 32 x 2 x 28,224 B.
    assert learner_batch_bytes(tiny_trace(), 32) == 32 * 2 * 28_224
