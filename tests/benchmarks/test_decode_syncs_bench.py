"""benchmarks/decode_syncs.py: its counter counts what it says, and the quick run prints every row."""

import pytest
import torch
from torch import nn

from benchmarks import decode_syncs

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_the_counter_sees_syncs_uploads_model_ops_and_tree_walks():
    x = torch.tensor([1.0, 0.0, 2.0])
    net = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
    with decode_syncs.counting() as c:
        x.tolist()
        x[x > 0]  # boolean mask: a nonzero inside
        int(x.sum())
        torch.nonzero(x)
        torch.multinomial(x.view(1, -1), 1)
        x[torch.tensor([0, 2])]  # an integer index: an upload, no sync
        net(x)
        net.eval()
    assert (c.syncs, c.model_syncs, c.uploads) == (5, 0, 1)
    assert c.sync_kinds == {"tolist": 1, "index": 1, "_local_scalar_dense": 1, "nonzero": 1, "multinomial": 1}
    assert c.inside >= 2  # linear, relu
    assert (c.train_calls, c.modules_walked) == (1, 3)
    assert c.steps == 0


def test_the_quick_run_prints_integer_counts_for_every_call(capsys):
    out = decode_syncs.main(["--quick"])
    printed = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith(("| T5", "| LLaMA"))]
    assert len(printed) == 6 and all(int(ln.split("|")[3]) > 0 for ln in printed)  # decode steps
    assert [(p, call.split()[0]) for p, call, _ in out] == [
        (p, k) for p in ("T5 embedded", "LLaMA + LoRA") for k in ("sample", "sample", "beam")]
    for _, _, c in out:
        values = [getattr(c, f) for f in c.FIELDS]
        assert all(isinstance(v, int) and v >= 0 for v in values)
        assert c.steps > 0 and c.syncs > 0 and c.outside > 0 and c.inside > 0
