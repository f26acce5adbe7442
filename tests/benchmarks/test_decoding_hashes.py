"""benchmarks/decoding_hashes.py: the quick run hashes every OpenAGI scenario, and a hash follows the plans."""

import pytest

from benchmarks import decoding_hashes

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_the_quick_run_hashes_every_scenario(capsys):
    out = decoding_hashes.main(["--quick"])
    printed = capsys.readouterr().out.splitlines()
    assert len(out) == len(printed) == 16  # 2 planners x (linear, two-input) x (beam, greedy, sample, scored)
    assert all(len(h) == 16 and int(h, 16) >= 0 for _, h in out)
    assert len({h for _, h in out}) == len(out)  # every scenario decodes something of its own


def test_a_hash_changes_with_any_bit_of_a_plan():
    class Plan:
        text, rows, starts, logprob = "A, B", ((3, 4, 1),), (0,), -1.25

    other = Plan()
    other.logprob = -1.25 + 2.0 ** -40  # one bit of the log-probability
    assert decoding_hashes.digest(decoding_hashes.plans_hash([[Plan()]])) != \
        decoding_hashes.digest(decoding_hashes.plans_hash([[other]]))
    assert decoding_hashes.digest(decoding_hashes.plans_hash([[Plan()]])) == \
        decoding_hashes.digest(decoding_hashes.plans_hash([[Plan()]]))
