"""Issue 25, no silent zeros in a flow's records: a completion or decision with a NaN logprob or
negative token counts is refused; a damaged trace is one error naming the file."""

from __future__ import annotations

import math

import pytest

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize("change, message", [
    ({"logprob": float("nan")}, "logprob=nan"), ({"logprob": math.inf}, "logprob=inf"),
    ({"logprob": -math.inf}, "logprob=-inf"), ({"prompt_tokens": -1}, "prompt_tokens=-1"),
    ({"completion_tokens": -3}, "completion_tokens=-3"),
])
def test_a_decision_with_a_nan_logprob_or_negative_token_counts_is_refused(change, message):
    from rltf.flows.backends.base import Completion
    from rltf.flows.training.trajectory import Decision

    with pytest.raises(ValueError, match=rf"Completion: {message}"):
        Completion(**{"text": "a", "prompt_tokens": 1, "completion_tokens": 1, "logprob": -0.5, **change})
    good = Completion("a", 1, 1, logprob=-0.5)
    for key, value in change.items():
        setattr(good, key, value)  # changed after it was made: the decision still refuses it
    with pytest.raises(ValueError, match=rf"decision of node 'leg1': {message}"):
        Decision("leg1", "executor", good)
    Decision("leg1", "executor", Completion("a", 0, 0, logprob=None))  # a backend that cannot say: fine


@pytest.mark.parametrize("content", [b'{"flow": "f", "pass_index": 0, "nodes": [', b"\xff\xfe not utf-8", b"[1, 2]",
                                     b'{"flow": "f", "pass_index": 0, "status": "ok", "started": "t", "nope": 1}'])
def test_a_damaged_trace_is_one_error_naming_the_file(tmp_path, content):
    from rltf.flows.engine.trace import load_trace
    from rltf.run.tracking import DamagedFileError

    path = tmp_path / "query3.json"
    path.write_bytes(content)
    with pytest.raises(DamagedFileError, match=rf"{path} is not (a readable )?(a )?flow trace"):
        load_trace(path)
