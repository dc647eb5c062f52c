"""The pinned FastGil's hot loop (archsim.sim.fast_gil): a thread alone in the learner process with
bursts and nobody waiting for the GIL, played part by part with LindleyThreads.finish_time inlined."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from archsim.sim.fast_gil import FastGil

IDLE, ASK, HAND, PY, NAT, PLAIN = range(6)  # a thread's phase in archsim.sim.fast_gil


def advance_lone(gil: FastGil, until: float) -> None:
    """FastGil._advance while one thread alone runs bursts and nobody waits for the GIL: its _step
    transitions with finish_time inlined (same sums in the same order; a lone thread always
    finds the GIL free), the loop that dominated the pinned engine's run time. Within a burst
    the slices alternate Python and native parts of fixed work, played on local variables."""
    thread = gil.active[0]
    state = gil.state[thread]
    threads = gil.threads
    speed = threads.speed[thread]
    free_at, busy, queue = threads.free_at, threads.busy_s, threads.queue
    end = threads.rec.end
    q_end = queue.end
    while state.phase != IDLE:
        t = state.until
        if t > until:
            return
        phase = state.phase
        if phase == PLAIN:
            gil._finish(thread, state, t)
            if len(gil.active) != 1 or gil.waiting:
                return  # its next burst asked for the GIL in vain (cannot happen alone)
            continue
        if phase == HAND:
            gil.wait_s += t - state.asked
            gil.holder = thread
            phase = PY
            first = state.py_work
        elif phase == PY and state.nat_work > 0:
            phase = NAT
            first = state.nat_work
        else:  # PY without native work, or NAT: the slice is over
            if state.left <= 1:
                gil.owner = None
                state.left = 0
                gil._finish(thread, state, t)
                if len(gil.active) != 1 or gil.waiting:
                    return
                continue
            state.left -= 1
            gil.holder = thread  # _ask: a free GIL, nobody waiting
            phase = PY
            first = state.py_work
        # parts from here: ``first`` (of ``phase``), then the slices' parts in turn, each
        # booked as LindleyThreads.finish_time(thread, work, t) books it
        py_s, nat_s = state.py_work / speed, state.nat_work / speed
        has_nat = state.nat_work > 0
        left = state.left
        arrivals = 0
        b = busy[thread]
        step_s = first / speed
        while True:
            free = free_at[thread]
            start = t if t > free else free
            finish = start + step_s
            free_at[thread] = finish
            if t < q_end:  # QueueStat.add_wait(t, start)
                arrivals += 1
                if start != t:
                    wait = (start if start < q_end else q_end) - t
                    queue.wait_sum += wait
                    queue.area += wait
            b += (finish if finish < end else end) - (start if start < end else end)
            t = finish
            if t > until:
                break
            # the part ending at t: the next one, or the burst's end
            if phase == PY and has_nat:
                phase, step_s = NAT, nat_s
                continue
            if left <= 1:
                break
            left -= 1
            phase, step_s = PY, py_s
        busy[thread] = b
        queue.arrivals += arrivals
        state.left = left
        state.phase = phase
        state.until = t
        gil.owner = thread if phase == PY else None  # a native part runs without the GIL
