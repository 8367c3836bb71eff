"""unique_name: the same names with or without TakenNames' per-hint memory."""

import random

from qonnx_ingest.names import TakenNames, unique_name


def test_taken_names_give_the_names_a_plain_set_gives():
    """Remembering the next suffix is only a shortcut: names taken behind its back (by other
    hints, or added directly) are still skipped, and the first free name is still chosen."""
    rng = random.Random(3)
    hints = ["Relu", "Relu_2", "conv", "conv_1", "x"]
    plain, remembered = {"Relu_1", "conv"}, TakenNames({"Relu_1", "conv"})
    got_plain, got_remembered = [], []
    for _ in range(500):
        if rng.random() < 0.1:  # a name claimed directly, as graph inputs are
            name = f"{rng.choice(hints)}_{rng.randint(1, 40)}"
            plain.add(name)
            remembered.add(name)
            continue
        hint = rng.choice(hints)
        got_plain.append(unique_name(hint, plain))
        got_remembered.append(unique_name(hint, remembered))
    assert got_plain == got_remembered
    assert len(set(got_plain)) == len(got_plain)
