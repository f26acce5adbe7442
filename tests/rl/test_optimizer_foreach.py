"""The RL loops' optimizer (rltf.rl.optim.make_optimizer) takes torch's multi-tensor AdamW path on the
CPU: it must give the per-tensor loop's weights bit for bit (so the main job's numbers do not move)."""

import torch
from torch import nn

from rltf.rl.optim import adamw_path, make_optimizer


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Embedding(500, 16), nn.Linear(16, 16), nn.LayerNorm(16), nn.Linear(16, 500))


def test_make_optimizer_matches_the_per_tensor_loop_bit_for_bit():
    ours_model, ref_model = _model(), _model()
    ours, _ = make_optimizer(ours_model, lr=1e-2, total_steps=10)
    assert ours.defaults["foreach"] is True
    ref = torch.optim.AdamW(ref_model.parameters(), lr=1e-2, weight_decay=0.0, foreach=False)
    gen = torch.Generator().manual_seed(1)
    for _ in range(10):
        for a, b in zip(ours_model.parameters(), ref_model.parameters()):
            g = torch.randn(a.shape, generator=gen)
            if a.dim() == 2 and a.shape[0] == 500:
                g[20:] = 0  # rows without gradient, as the token embedding's
            a.grad, b.grad = g.clone(), g.clone()
        ours.step()
        ref.step()
    for a, b in zip(ours_model.parameters(), ref_model.parameters()):
        assert torch.equal(a, b)
    assert not torch.equal(ours_model[0].weight, _model()[0].weight)  # the steps moved the weights


def test_gpus_take_the_fused_kernel_as_trl_does_and_it_is_the_same_update_up_to_rounding():
    assert adamw_path({"cuda"}) == {"fused": True} and adamw_path({"cpu"}) == {"foreach": True}
    assert adamw_path({"cpu", "cuda"}) == {} and adamw_path({"mps"}) == {}
    fused_model, ours_model = _model(), _model()
    ours, _ = make_optimizer(ours_model, lr=1e-2, total_steps=10)
    fused = torch.optim.AdamW(fused_model.parameters(), lr=1e-2, weight_decay=0.0, fused=True)  # CPU kernel
    gen = torch.Generator().manual_seed(2)
    for _ in range(10):
        for a, b in zip(ours_model.parameters(), fused_model.parameters()):
            g = torch.randn(a.shape, generator=gen)
            a.grad, b.grad = g.clone(), g.clone()
        ours.step()
        fused.step()
    for a, b in zip(ours_model.parameters(), fused_model.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5)
