"""``hf``: any local transformers model (a hub id in the local cache, or a directory) as a backend.

Causal or seq2seq is read from the model's config (``arch="auto"``, or insist on one); the weights
are cast to an explicit ``dtype`` and moved to ``device``. Loading goes through rltf's own loaders
(:mod:`rltf.planners.hf_models`: left padding and a pad token for causal tokenizers, errors that say why).
Generation: :class:`rltf.flows.backends.local.LocalModelBackend` (batched, greedy by default,
sampling with a generator on the model's device, chat template when the tokenizer has one).
"""

from __future__ import annotations

import torch

from rltf.flows.backends.base import BackendError, Sampling
from rltf.flows.backends.local import ChatTemplate, LocalModelBackend
from rltf.planners.hf_models import DTYPES, load_model, load_tokenizer

__all__ = ["HFBackend"]


class HFBackend(LocalModelBackend):
    """A transformers model loaded from ``model`` (an id or a directory) on ``device`` in ``dtype``."""

    def __init__(self, model: str, *, device: str | torch.device = "cpu", dtype: str = "float32",
                 arch: str = "auto", sampling: Sampling | None = None, seed: int = 0,
                 chat_template: ChatTemplate = "auto", batch_size: int = 16):
        if dtype not in DTYPES:
            raise BackendError(f"dtype={dtype!r}: expected one of {sorted(DTYPES)}")
        net, is_enc_dec = load_model(str(model), dtype, arch, False)
        tokenizer = load_tokenizer(str(model), is_enc_dec)
        net = net.to(torch.device(device)).eval()
        self.source = str(model)
        super().__init__(net, tokenizer, is_enc_dec, sampling=sampling, seed=seed, chat_template=chat_template,
                         batch_size=batch_size)

    def __repr__(self) -> str:
        return (f"HFBackend({self.source!r}, {'seq2seq' if self.is_encoder_decoder else 'causal'}, "
                f"device={self.device}, dtype={next(self.model.parameters()).dtype})")
