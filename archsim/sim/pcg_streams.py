"""The first draws of many actors' generators at once: numpy's ``PCG64`` and ``Generator.integers``
computed for every actor in one set of array operations, bit for bit (issue 17).

Each actor's env-step works come from its own ``Generator(PCG64(...))`` (archsim.sim.system). A run
of 4,096 actors starts by drawing each actor's first chunk: 4,096 generators made and 4,096
``integers`` calls, ~23 ms of CPU on the 2-core development VM, a fifth of a paced 60-s
``--engine steady`` run (benchmarks/sim_speed.py). Here all of them are one pass over arrays of
4,096 (~2 ms), and each actor's generator is made only when it needs more than its first chunk,
from the state computed here.

What is reproduced (numpy 1.17+, ``numpy/random/src/pcg64/pcg64.h`` and
``numpy/random/src/distributions/distributions.c``):
- PCG64 is PCG XSL-RR 128/64 (M. E. O'Neill, "PCG: A Family of Simple Fast Space-Efficient
  Statistically Good Algorithms for Random Number Generation", HMC-CS-2014-0905, 2014): a 128-bit
  LCG ``s = s * MULT + inc``, stepped before each output; output ``rotr64(hi ^ lo, hi >> 58)``;
  seeded from 4 uint64 words ``(s_hi, s_lo, seq_hi, seq_lo)`` with ``inc = seq << 1 | 1``,
  ``s = 0``, step, ``s += seed``, step.
- ``next_uint32`` hands out a 64-bit output's low half and keeps the high half for the next call
  (the state's ``has_uint32`` / ``uinteger``).
- ``integers(0, n)`` for ``n`` below 2**32 is Lemire's multiply-shift (D. Lemire, "Fast Random
  Integer Generation in an Interval", ACM TOMACS 29(1), 2019): ``m = u32 * n``, the value
  ``m >> 32``, redrawn while ``m mod 2**32 < (2**32 - n) mod n``. A redraw happens with
  probability below n / 2**32; an actor whose first chunk would redraw is left to numpy.

tests/test_sim_streams.py compares the values and the generator state after them with numpy's.
"""

from __future__ import annotations

import numpy as np

_MASK32 = np.uint64(0xFFFFFFFF)
_SHIFT32 = np.uint64(32)
# PCG's default 128-bit LCG multiplier (pcg64.h: PCG_DEFAULT_MULTIPLIER_128)
_MULT = 0x2360ED051FC65DA44385DF649FCCF645
_MULT_HI, _MULT_LO = np.uint64(_MULT >> 64), np.uint64(_MULT & (2**64 - 1))


def _mul_hi(a: np.ndarray, b: np.uint64) -> np.ndarray:
    """The high 64 bits of the 128-bit products ``a * b`` (uint64, from 32-bit halves)."""
    a0, a1 = a & _MASK32, a >> _SHIFT32
    b0, b1 = b & _MASK32, b >> _SHIFT32
    p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    mid = (p00 >> _SHIFT32) + (p01 & _MASK32) + (p10 & _MASK32)
    return p11 + (p01 >> _SHIFT32) + (p10 >> _SHIFT32) + (mid >> _SHIFT32)


def _step(hi, lo, inc_hi, inc_lo):
    """One LCG step of 128-bit states held as (high, low) uint64 arrays: ``s * MULT + inc``."""
    prod_lo = lo * _MULT_LO
    prod_hi = _mul_hi(lo, _MULT_LO) + lo * _MULT_HI + hi * _MULT_LO
    new_lo = prod_lo + inc_lo
    return prod_hi + inc_hi + (new_lo < prod_lo).astype(np.uint64), new_lo


def _output(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """XSL-RR: the 64-bit output of each state."""
    x = hi ^ lo
    rot = hi >> np.uint64(58)
    return (x >> rot) | (x << ((np.uint64(64) - rot) & np.uint64(63)))


class PrimedDraws:
    """The first ``count`` draws of ``integers(0, n)`` from ``PCG64`` seeded by each row of ``words``
    (uint64, 4 a row, as ``SeedSequence.generate_state(4, np.uint64)`` gives), and each generator's
    state after them."""

    def __init__(self, words: np.ndarray, n: int, count: int) -> None:
        if not 2 <= n < 2**32 or count < 1:
            raise ValueError("PrimedDraws: n in [2, 2**32) and count >= 1 (numpy's 32-bit path)")
        with np.errstate(over="ignore"):  # uint64 arithmetic wraps, as the C code's does
            seed_hi, seed_lo, seq_hi, seq_lo = (words[:, i] for i in range(4))
            self.inc_hi = (seq_hi << np.uint64(1)) | (seq_lo >> np.uint64(63))
            self.inc_lo = (seq_lo << np.uint64(1)) | np.uint64(1)
            lo = self.inc_lo + seed_lo  # 0 * MULT + inc, plus the seed
            hi = self.inc_hi + seed_hi + (lo < seed_lo).astype(np.uint64)
            hi, lo = _step(hi, lo, self.inc_hi, self.inc_lo)
            halves = []
            for _ in range((count + 1) // 2):
                hi, lo = _step(hi, lo, self.inc_hi, self.inc_lo)
                out = _output(hi, lo)
                halves += [out & _MASK32, out >> _SHIFT32]
            self.hi, self.lo = hi, lo
            # an odd count leaves the last output's high half for the next 32-bit draw (numpy
            # keeps that half in the state after handing it out too)
            self.has_spare = count % 2
            self.last_high = halves[-1]
            m = np.stack(halves[:count], axis=1) * np.uint64(n)
        # rows whose Lemire draw would be redrawn: not these values (left to numpy)
        self.ok = ~((m & _MASK32) < np.uint64((2**32 - n) % n)).any(axis=1)
        self.values = (m >> _SHIFT32).astype(np.int64)  # (rows, count)

    def state(self, row: int) -> dict:
        """Row ``row``'s generator state after its draws, as ``PCG64.state`` takes it."""
        return {
            "bit_generator": "PCG64",
            "state": {
                "state": (int(self.hi[row]) << 64) | int(self.lo[row]),
                "inc": (int(self.inc_hi[row]) << 64) | int(self.inc_lo[row]),
            },
            "has_uint32": self.has_spare,
            "uinteger": int(self.last_high[row]),
        }
