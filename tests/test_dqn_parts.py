"""The DQN workload's parts against hand-worked values (Mnih et al. 2015 preprocessing and learning)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from workloads.dqn.env import (
    FRAME_SIZE,
    STACK_SIZE,
    AtariEnv,
    FramePreprocessor,
    area_resize_matrix,
)
from workloads.dqn.learner import DqnLearner, LearnerConfig, epsilon_at, huber_loss, td_targets
from workloads.dqn.model import NatureDQN
from workloads.dqn.replay import ReplayBuffer
from workloads.dqn.run import train_due
from workloads.dqn.settings import DqnConfig

RAW_SHAPE = (210, 160)  # ALE screen, rows x columns


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """Like the workload's default: on this shared 2-core box two intra-op threads spin each other."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_area_resize_matrix_golden_5_to_2():
    # scale 2.5: output 0 covers inputs [0, 2.5) -> 1/2.5, 1/2.5, 0.5/2.5 = 0.4, 0.4, 0.2
    #            output 1 covers inputs [2.5, 5) -> 0.2, 0.4, 0.4 on inputs 2, 3, 4
    expected = np.array([[0.4, 0.4, 0.2, 0.0, 0.0], [0.0, 0.0, 0.2, 0.4, 0.4]], dtype=np.float32)
    np.testing.assert_allclose(area_resize_matrix(5, 2), expected, atol=1e-6)


@pytest.mark.parametrize("in_size", [160, 210])
def test_area_resize_rows_sum_to_one(in_size):
    np.testing.assert_allclose(area_resize_matrix(in_size, FRAME_SIZE).sum(axis=1), 1.0, atol=1e-5)


def test_frame_is_max_of_last_two_then_resized():
    # previous frame: 200 in raw rows 0-4, last frame: 100 everywhere. The max is 200 in rows 0-4.
    # 210 -> 84 rows is a scale of 2.5: output row 0 = raw rows [0, 2.5), row 1 = [2.5, 5): both 200;
    # output row 2 = raw rows [5, 7.5): 100. Columns are uniform, so every column agrees.
    previous = np.zeros(RAW_SHAPE, dtype=np.uint8)
    previous[:5] = 200
    last = np.full(RAW_SHAPE, 100, dtype=np.uint8)
    frame = FramePreprocessor(RAW_SHAPE).frame(last, previous)
    assert frame.shape == (FRAME_SIZE, FRAME_SIZE) and frame.dtype == np.uint8
    assert (frame[:2] == 200).all() and (frame[2:] == 100).all()
    # a sprite drawn only on the previous frame (Atari flicker) survives the max
    flicker = np.zeros(RAW_SHAPE, dtype=np.uint8)
    flicker[100:105, 80:84] = 255
    blank = np.zeros(RAW_SHAPE, dtype=np.uint8)
    assert FramePreprocessor(RAW_SHAPE).frame(blank, flicker).max() > 0


def test_stack_shifts_one_frame_per_push():
    pre = FramePreprocessor(RAW_SHAPE)
    frames = [np.full(RAW_SHAPE, value, dtype=np.uint8) for value in (10, 20, 30, 40, 50)]
    obs = pre.reset(frames[0], frames[0])
    assert obs.shape == (STACK_SIZE, FRAME_SIZE, FRAME_SIZE) and obs.dtype == np.uint8
    assert [int(f[0, 0]) for f in obs] == [10, 10, 10, 10]
    for value in frames[1:]:
        obs = pre.push(value, value)
    assert [int(f[0, 0]) for f in obs] == [20, 30, 40, 50]  # oldest first, newest last


def test_real_pong_steps_give_dqn_observations():
    env = AtariEnv(seed=0)
    pre = FramePreprocessor(env.raw_shape)
    first = env.reset()
    obs = pre.reset(first.last, first.previous)
    step = env.step_frames(0)
    nxt = pre.push(step.last, step.previous)
    env.close()
    assert env.raw_shape == RAW_SHAPE and env.num_actions == 6  # Pong's minimal action set
    assert nxt.shape == (4, 84, 84) and nxt.dtype == np.uint8
    np.testing.assert_array_equal(nxt[:3], obs[1:])
    assert nxt[-1].max() > 0  # the Pong court is not black


def test_replay_is_preallocated_uint8_and_wraps_around():
    replay = ReplayBuffer(3, (4, 84, 84), seed=0)
    assert replay.obs.shape == (3, 4, 84, 84) and replay.obs.dtype == np.uint8
    assert replay.next_frame.shape == (3, 84, 84) and replay.next_frame.dtype == np.uint8
    buffers = [replay.obs, replay.next_frame, replay.actions]
    for k in range(5):
        obs = np.full((4, 84, 84), k, dtype=np.uint8)
        nxt = np.concatenate([obs[1:], np.full((1, 84, 84), k + 100, dtype=np.uint8)])
        replay.add(obs, action=k, reward=float(k), done=k == 4, next_obs=nxt)
    # 5 adds into 3 slots: slots hold transitions 3, 4, 2 and the next write goes to slot 2
    assert len(replay) == 3 and replay.cursor == 2
    assert list(replay.actions) == [3, 4, 2]
    assert list(replay.dones) == [0.0, 1.0, 0.0]
    assert all(
        a is b
        for a, b in zip(buffers, [replay.obs, replay.next_frame, replay.actions], strict=True)
    )
    batch = replay.sample(64)
    assert batch.obs.shape == (64, 4, 84, 84) and batch.obs.dtype == np.uint8
    for i in range(64):
        k = int(batch.actions[i])
        assert (batch.obs[i] == k).all()
        assert (batch.next_obs[i, :3] == k).all() and (batch.next_obs[i, 3] == k + 100).all()


def test_epsilon_schedule_at_hand_worked_points():
    # learn start 100, decay over 1000 steps after it: 1.0 -> 0.1 linearly.
    assert epsilon_at(0, 100, 1000) == 1.0
    assert epsilon_at(100, 100, 1000) == 1.0
    assert epsilon_at(600, 100, 1000) == pytest.approx(0.1 + 0.9 * 0.5)  # = 0.55
    assert epsilon_at(1100, 100, 1000) == pytest.approx(0.1)
    assert epsilon_at(5000, 100, 1000) == pytest.approx(0.1)


def test_td_targets_and_huber_loss_hand_worked():
    rewards = torch.tensor([1.0, 0.0])
    dones = torch.tensor([0.0, 1.0])
    next_q = torch.tensor([[0.5, 2.0], [3.0, 1.0]])
    # row 0: 1 + 0.99 * 2.0 = 2.98; row 1 is terminal: 0
    targets = td_targets(rewards, dones, next_q, gamma=0.99)
    torch.testing.assert_close(targets, torch.tensor([2.98, 0.0]))
    # Huber (delta 1): |1.0 - 2.98| = 1.98 > 1 -> 1.98 - 0.5 = 1.48; |0.5 - 0| = 0.5 -> 0.5*0.25 = 0.125
    loss = huber_loss(torch.tensor([1.0, 0.5]), targets)
    assert float(loss) == pytest.approx((1.48 + 0.125) / 2)


def test_nature_dqn_shape_and_parameter_count():
    # conv1 4*32*8*8+32 = 8,224; conv2 32*64*4*4+64 = 32,832; conv3 64*64*3*3+64 = 36,928;
    # fc1 3136*512+512 = 1,606,144; fc2 512*6+6 = 3,078 -> 1,687,206 (REFERENCE.md: 1.69 M)
    model = NatureDQN(6)
    assert sum(p.numel() for p in model.parameters()) == 1_687_206
    out = model(torch.zeros((2, 4, 84, 84), dtype=torch.uint8))
    assert out.shape == (2, 6)


def test_target_syncs_every_period_updates():
    learner = DqnLearner(LearnerConfig(num_actions=6, target_period=3), seed=0)
    replay = ReplayBuffer(8, (4, 84, 84), seed=0)
    rng = np.random.default_rng(0)
    for _ in range(8):
        obs = rng.integers(0, 256, (4, 84, 84), dtype=np.uint8)
        replay.add(obs, int(rng.integers(6)), 1.0, False, obs)

    def same_weights() -> bool:
        return all(
            torch.equal(a, b)
            for a, b in zip(learner.online.parameters(), learner.target.parameters(), strict=True)
        )

    due = []
    for _ in range(3):
        learner.backward(learner.forward_loss(learner.to_tensors(replay.sample(4))))
        learner.optimizer_step()
        due.append(learner.target_sync_due())
    assert due == [False, False, True]  # updates 1, 2, 3 with period 3
    assert not same_weights()  # three RMSProp updates moved the online net
    learner.sync_target()
    assert same_weights()


def test_train_every_four_steps_after_learn_start():
    config = DqnConfig(learn_start=8, train_every=4)
    assert [t for t in range(20) if train_due(t, config)] == [8, 12, 16]


@settings(max_examples=40, deadline=None)
@given(capacity=st.integers(1, 6), adds=st.integers(0, 20))
def test_replay_ring_invariants(capacity, adds):
    replay = ReplayBuffer(capacity, (4, 2, 2), seed=0)
    for k in range(adds):
        obs = np.full((4, 2, 2), k % 256, dtype=np.uint8)
        replay.add(obs, action=k, reward=0.0, done=False, next_obs=obs)
    assert len(replay) == min(adds, capacity)
    assert replay.cursor == adds % capacity
    # every filled slot holds the newest transition written to it: k with k % capacity == slot
    for slot in range(len(replay)):
        newest = max(k for k in range(adds) if k % capacity == slot)
        assert replay.actions[slot] == newest and (replay.obs[slot] == newest % 256).all()


def test_updates_on_a_fixed_batch_reduce_the_loss():
    """The learner really learns: RMSProp steps on one batch drive its Huber loss down."""
    learner = DqnLearner(LearnerConfig(num_actions=6, target_period=10_000), seed=0)
    replay = ReplayBuffer(4, (4, 84, 84), seed=0)
    rng = np.random.default_rng(1)
    for k in range(4):
        obs = rng.integers(0, 256, (4, 84, 84), dtype=np.uint8)
        replay.add(obs, k, float(k % 2), k == 3, obs)
    batch = learner.to_tensors(replay.sample(4))
    losses = []
    for _ in range(30):
        loss = learner.forward_loss(batch)
        losses.append(float(loss.detach()))
        learner.backward(loss)
        learner.optimizer_step()
    assert losses[-1] < 0.5 * losses[0]
