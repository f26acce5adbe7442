"""What travels with a step's scores (constrained_decoding/host_reads.py): packed into one read, every
value back exactly, by name and in its shape."""

from __future__ import annotations

import torch

from constrained_decoding.host_reads import HostRead


def test_a_read_unpacks_every_part_exactly_by_name(monkeypatch):
    scores = torch.tensor([[-0.1, float("-inf")], [-2.5, -3.25]], dtype=torch.float32)
    keys = torch.tensor([[1e-300, -7.0], [float("-inf"), 3.0]], dtype=torch.float64)
    left = torch.tensor([0.5, -0.25], dtype=torch.float64)
    ids = torch.tensor([[2**52 + 1, 7, 0], [3, 4, 5]], dtype=torch.long)  # integers below 2**53 stay exact
    counts = torch.tensor([0, 3])
    reads = []
    real = torch.Tensor.tolist
    monkeypatch.setattr(torch.Tensor, "tolist", lambda self: reads.append(1) or real(self))
    got = (HostRead().columns("groups", scores=scores, keys=keys, left=left).add("ids", ids)
           .add("bad", counts).add("skips", torch.tensor(9)).read())
    monkeypatch.undo()
    assert reads == [1]  # one transfer
    assert got["groups"] == [
        {"scores": [scores[0, 0].item(), float("-inf")], "keys": [1e-300, -7.0], "left": [0.5]},
        {"scores": [-2.5, -3.25], "keys": [float("-inf"), 3.0], "left": [-0.25]},
    ]
    assert got["ids"] == [[2**52 + 1, 7, 0], [3, 4, 5]] and int(got["ids"][0][0]) == 2**52 + 1
    assert got["bad"] == [0, 3] and got["skips"] == 9


def test_an_empty_part_keeps_its_place():
    got = HostRead().add("none", torch.zeros(0)).add("rows", torch.zeros((0, 4))).add("n", torch.tensor(2)).read()
    assert got == {"none": [], "rows": [], "n": 2.0}
