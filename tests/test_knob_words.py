"""Word knobs (--inference, --engine, --loop, ...) read in any case: the help prints their choices
upper-cased as the metavar (``--inference CENTRAL|LOCAL``), and typing that was refused."""

from __future__ import annotations

import pytest

from archsim.errors import ArchsimError
from archsim.sim.knobs import KNOB_BY_NAME, parse_knob


@pytest.mark.parametrize(
    ("name", "typed", "read"),
    [
        ("inference", "CENTRAL", "central"),
        ("inference", "Local", "local"),
        ("engine", "FAST", "fast"),
    ],
)
def test_a_word_knob_reads_in_any_case(name, typed, read):
    assert parse_knob(KNOB_BY_NAME[name], typed) == read


def test_a_word_that_is_no_choice_is_still_refused():
    with pytest.raises(ArchsimError, match="is not a valid central|local"):
        parse_knob(KNOB_BY_NAME["inference"], "Centrall")
