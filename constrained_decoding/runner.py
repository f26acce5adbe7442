"""Step-wise next-token scores of an HF planner with a KV cache, for allowed tokens only.

:class:`PlannerRunner` hides the difference between encoder-decoder (T5) and causal (LLaMA-style)
models and PEFT wrappers. It returns *features* per row; :meth:`PlannerRunner.allowed_logits`
turns them into the logits of a few allowed token ids per row. For the common heads (a plain
``nn.Linear`` output layer, T5's optional ``d_model**-0.5`` rescale) the features are the final
hidden states and only the allowed rows of the output matrix are multiplied: a constrained step
costs the transformer body, not a ``[rows, vocab]`` projection. For any other head (logit
soft-capping, LoRA on ``lm_head``) the features are the full logits from the model's own
``forward``. Which path a model takes is decided once per model by comparing both on a probe.
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn
from transformers.cache_utils import DynamicCache, EncoderDecoderCache
from transformers.modeling_outputs import BaseModelOutput

from constrained_decoding.prompts import encode_prompts

if TYPE_CHECKING:
    from constrained_decoding.grammar import StateTables


def unwrap_model(model: nn.Module) -> nn.Module:
    """The HF model inside a PEFT wrapper (its LoRA layers stay active), else the model itself."""
    get_base = getattr(model, "get_base_model", None)
    if callable(get_base) and hasattr(model, "peft_config"):
        return get_base()
    return model


def _pad(seqs: Sequence[Sequence[int]], value: int, left: bool, device) -> tuple[torch.Tensor, torch.Tensor]:
    n = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), n), value, dtype=torch.long)
    mask = torch.zeros((len(seqs), n), dtype=torch.long)
    for r, s in enumerate(seqs):
        if s:
            sl = slice(n - len(s), n) if left else slice(0, len(s))
            ids[r, sl] = torch.as_tensor(list(s), dtype=torch.long)
            mask[r, sl] = 1
    return ids.to(device), mask.to(device)


def _stack_left_padded(a: torch.Tensor, b: torch.Tensor, length: int, dim: int) -> torch.Tensor:
    """The rows of ``a`` then of ``b`` (dim 0), each left-padded with zeros to ``length`` along ``dim``.

    One write per element: joining rows copies the whole running cache, so no intermediate copies."""
    shape = list(a.shape)
    shape[0], shape[dim] = a.shape[0] + b.shape[0], length
    out = a.new_empty(shape)
    for x, part in ((a, out[: a.shape[0]]), (b, out[a.shape[0] :])):
        short = length - x.shape[dim]
        part.narrow(dim, 0, short).zero_()
        part.narrow(dim, short, x.shape[dim]).copy_(x)
    return out


@dataclass
class RowFork:
    """A running row's decoder cache up to its first ``n_valid`` positions (context and tokens read).

    Taken when a row finishes (it may leave the batch before rows that continue its tokens join):
    such a row starts from a copy of this instead of prefilling what the finished row already read."""

    keys: list[torch.Tensor]  # per self-attention layer: [heads, columns, dim] (masked columns included)
    values: list[torch.Tensor]
    mask: torch.Tensor  # [columns]: which columns hold positions
    n_valid: int
    cross: list[tuple[torch.Tensor, torch.Tensor]] | None = None  # encoder-decoder: cross-attention K/V per layer
    enc: torch.Tensor | None = None  # encoder-decoder: encoder states and mask of the row's prompt
    enc_mask: torch.Tensor | None = None

    def cut(self, n_valid: int) -> int:
        """Columns holding the first ``n_valid`` positions."""
        return int((self.mask.cumsum(0) < n_valid).sum()) + 1


def _left_pad_rows(parts: Sequence[torch.Tensor], length: int, dim: int) -> torch.Tensor:
    """Stack ``parts`` (one row each, no batch dim) into ``[n, ...]``, each right-aligned to ``length`` along ``dim``."""
    shape = list(parts[0].shape)
    shape[dim] = length
    out = parts[0].new_zeros([len(parts), *shape])
    for i, x in enumerate(parts):
        out[i].narrow(dim, length - x.shape[dim], x.shape[dim]).copy_(x)
    return out


_HEAD_MODE: "weakref.WeakKeyDictionary[nn.Module, bool]" = weakref.WeakKeyDictionary()


class PlannerRunner:
    """One batch of prompts and the rows decoded from them (see the module docstring)."""

    def __init__(self, model: nn.Module, tokenizer, prompts: Sequence[str], *, pad_id: int,
                 through_forward: bool = False):
        """``through_forward``: :meth:`teacher_force` calls ``model``'s own ``forward`` (the PEFT /
        FSDP wrapper's, full-vocabulary logits) and never a sub-module — what an FSDP-sharded model
        needs for its hooks; no encoder pass or head probe happens here then."""
        self.model = unwrap_model(model)
        self.outer = model
        self.through_forward = through_forward
        cfg = self.model.config
        self.encoder_decoder = bool(getattr(cfg, "is_encoder_decoder", False))
        self.device = next(self.model.parameters()).device
        self.pad_id = pad_id
        head = self.model.get_output_embeddings()
        self.scale = 1.0
        if self.encoder_decoder:
            if getattr(cfg, "scale_decoder_outputs", getattr(cfg, "tie_word_embeddings", False)):
                self.scale = cfg.d_model ** -0.5
            start = cfg.decoder_start_token_id
            self.decoder_start = cfg.pad_token_id if start is None else start
            if self.decoder_start is None:
                raise ValueError("the model config has neither decoder_start_token_id nor pad_token_id")
        self.head_weight = head.weight if isinstance(head, nn.Linear) else None
        self.head_bias = head.bias if isinstance(head, nn.Linear) else None
        self.restricted = not through_forward and self.head_weight is not None and self._restricted_head_ok()
        self.prompt_ids = encode_prompts(tokenizer, prompts, self.encoder_decoder)
        self._keep_arg = "logits_to_keep" in inspect.signature(self.model.forward).parameters
        if self.encoder_decoder and not through_forward:
            ids, mask = _pad(self.prompt_ids, pad_id, left=False, device=self.device)
            self.enc_hidden = self.model.get_encoder()(input_ids=ids, attention_mask=mask).last_hidden_state
            self.enc_mask = mask

    # ------------------------------------------------------------------ scores of allowed tokens

    def allowed_logits(self, feats: torch.Tensor, tables: "StateTables", state: torch.Tensor) -> torch.Tensor:
        """Logits (float32) ``[..., D]`` of the tokens grammar states ``state[...]`` allow, from features ``feats[..., F]``.

        Restricted heads multiply the features by the output rows of ``tables.vocab`` only (the
        few hundred ids the grammars can emit), then gather each state's slots."""
        if not self.restricted:
            return feats.gather(-1, tables.allowed[state]).float()
        w = self.head_weight.index_select(0, tables.vocab)
        z = torch.matmul(feats.to(w.dtype), w.t())
        if self.head_bias is not None:
            z = z + self.head_bias.index_select(0, tables.vocab)
        return z.gather(-1, tables.allowed_local[state]).float()

    def _restricted_head_ok(self) -> bool:
        """Do body features times the output matrix reproduce the model's logits? (cached per model)"""
        if self.model in _HEAD_MODE:
            return _HEAD_MODE[self.model]
        ids = (torch.arange(2, 8, device=self.device) % self.head_weight.shape[0]).unsqueeze(0)
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                if self.encoder_decoder:
                    enc = self.model.get_encoder()(input_ids=ids).last_hidden_state
                    dec = ids[:, :3]
                    full = self.model(encoder_outputs=BaseModelOutput(last_hidden_state=enc),
                                      decoder_input_ids=dec).logits
                    h = self.model.get_decoder()(input_ids=dec, encoder_hidden_states=enc).last_hidden_state
                    h = h * self.scale
                else:
                    full = self.model(input_ids=ids).logits
                    h = self.model.base_model(input_ids=ids).last_hidden_state
                mine = F.linear(h.to(self.head_weight.dtype), self.head_weight, self.head_bias)
                tol = 1e-3 * max(1.0, float(full.abs().max()))
                ok = full.shape == mine.shape and bool((full.float() - mine.float()).abs().max() <= tol)
        except (AttributeError, TypeError, RuntimeError):  # an architecture this shortcut does not know
            ok = False
        finally:
            self.model.train(was_training)
        _HEAD_MODE[self.model] = ok
        return ok

    # ------------------------------------------------------------------------- decoding with cache

    def start(self, prompt_idx: torch.Tensor, prefixes: Sequence[Sequence[int]]) -> torch.Tensor:
        """Open rows: row ``r`` reads prompt ``prompt_idx[r]`` then ``prefixes[r]``; features of the next token."""
        prompt_idx = prompt_idx.to(self.device)
        if self.encoder_decoder:
            self.row_enc = self.enc_hidden.index_select(0, prompt_idx)
            self.row_enc_mask = self.enc_mask.index_select(0, prompt_idx)
            ids, mask = _pad([[self.decoder_start, *p] for p in prefixes], self.pad_id, True, self.device)
            # rows of equal length need no decoder mask (and HF builds none: cheaper steps)
            self.mask = None if len({len(p) for p in prefixes}) == 1 else mask
            self.cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
            return self._dec(ids)
        rows = prompt_idx.tolist()
        uniq = sorted(set(rows))
        self.cache = DynamicCache()
        if min(len(self.prompt_ids[u]) for u in uniq) < 2:  # nothing to share: prefill each row whole
            ids, self.mask = _pad([self.prompt_ids[p] + list(q) for p, q in zip(rows, prefixes)], self.pad_id, True,
                                  self.device)
            self.pos = (self.mask.cumsum(-1) - 1).clamp(min=0)
            return self._causal(ids, self.pos)
        # the prompts (but their last token) once per distinct prompt, then the cache is copied to the rows
        head, head_mask = _pad([self.prompt_ids[u][:-1] for u in uniq], self.pad_id, True, self.device)
        self._causal(head, (head_mask.cumsum(-1) - 1).clamp(min=0), head_mask)
        where = {u: i for i, u in enumerate(uniq)}
        expand = torch.as_tensor([where[p] for p in rows], device=self.device)
        self.cache.reorder_cache(expand)
        tail, tail_mask = _pad([[self.prompt_ids[p][-1], *q] for p, q in zip(rows, prefixes)], self.pad_id, True,
                               self.device)
        self.mask = torch.cat([head_mask.index_select(0, expand), tail_mask], 1)
        self.pos = (self.mask.cumsum(-1) - 1).clamp(min=0)[:, head.shape[1] :]
        return self._causal(tail, self.pos)

    def add_rows(self, prompt_idx: torch.Tensor, prefixes: Sequence[Sequence[int]],
                 copies: torch.Tensor | None = None,
                 forks: Sequence[tuple[RowFork, int] | None] | None = None) -> torch.Tensor:
        """Open rows (as :meth:`start`) that join the running batch after its rows; their features.

        Continuous batching: rows can join while others decode, so passes stay full. The new rows
        are prefilled in a cache of their own, then both caches are left-padded to one time axis
        (zeros, masked out) and concatenated along the batch. Relative (T5) and rotary (LLaMA)
        positions stay right: the mask hides the padding and position ids continue per row.
        ``copies``: row ``r`` of the joining rows is prefilled row ``copies[r]`` (identical rows
        prefilled once). ``forks``: per row, ``(fork, shared)`` where the fork holds the row's context
        then (at least) the first ``shared`` tokens of its prefix (a finished row the new row
        continues), or None: such a row starts from a copy of the fork and prefills only the rest."""
        old = self._batch()
        if old["rows"] == 0:
            old = None
        keep = self._fork_plan(prefixes, forks)
        fresh = [i for i, k in enumerate(keep) if k == 0]
        forked = [i for i, k in enumerate(keep) if k]
        feats = []
        if fresh:
            feats.append(self.start(prompt_idx[fresh], [prefixes[i] for i in fresh]))
        if forked:
            first = self._batch() if fresh else None
            parts = [forks[i] for i in forked]  # type: ignore[index]
            n_valid = [self.context_len(int(prompt_idx[i])) + keep[i] for i in forked]
            feats.append(self._start_forked([f for f, _ in parts], n_valid, [prefixes[i][keep[i] :] for i in forked]))
            if first is not None:
                self._prepend(first)
        feats = torch.cat(feats) if len(feats) > 1 else feats[0]
        where = torch.empty(len(keep), dtype=torch.long)
        where[fresh + forked] = torch.arange(len(keep))
        if copies is not None:
            where = where[copies.cpu()]
        if copies is not None or forked and fresh:
            where = where.to(self.device)
            self.select(where)
            feats = feats.index_select(0, where)
        if old is not None:
            self._prepend(old)
        return feats

    @staticmethod
    def _fork_plan(prefixes: Sequence[Sequence[int]], forks: Sequence[tuple[RowFork, int] | None] | None) -> list[int]:
        """Per row, how many prefix tokens to take from its fork (0: prefill the whole prefix).

        The forked rows prefill suffixes of one length ``S``: T5's relative positions need a row's
        cached and new positions contiguous, so the suffixes cannot be left-padded. ``S`` is the
        longest suffix a fork leaves; rows whose prefix is not longer than ``S`` are prefilled whole."""
        if not forks:
            return [0] * len(prefixes)
        rest = [len(p) - f[1] for p, f in zip(prefixes, forks) if f is not None and f[1] > 0]
        if not rest:
            return [0] * len(prefixes)
        width = max(max(rest), 1)
        return [len(p) - width if f is not None and f[1] > 0 and len(p) > width else 0
                for p, f in zip(prefixes, forks)]

    def context_len(self, prompt: int) -> int:
        """Cache positions a row holds before its own tokens: the decoder start (T5) or its prompt."""
        return 1 if self.encoder_decoder else len(self.prompt_ids[prompt])

    def fork(self, row: int, n_valid: int) -> RowFork:
        """Running row ``row``'s cache up to its first ``n_valid`` positions (a copy: see :class:`RowFork`)."""
        layers = (self.cache.self_attention_cache if self.encoder_decoder else self.cache).layers
        if self.mask is None:
            mask = torch.ones(n_valid, dtype=torch.long, device=self.device)
        else:
            mask = self.mask[row]
            mask = mask[: int((mask.cumsum(0) < n_valid).sum()) + 1].clone()
        c = mask.shape[0]
        f = RowFork([x.keys[row, :, :c].clone() for x in layers], [x.values[row, :, :c].clone() for x in layers],
                    mask, n_valid)
        if self.encoder_decoder:
            f.cross = [(x.keys[row].clone(), x.values[row].clone()) for x in self.cache.cross_attention_cache.layers]
            f.enc, f.enc_mask = self.row_enc[row].clone(), self.row_enc_mask[row].clone()
        return f

    def _start_forked(self, forks: Sequence[RowFork], n_valid: Sequence[int], suffixes: Sequence[Sequence[int]]
                      ) -> torch.Tensor:
        """Open rows from forks (their first ``n_valid[r]`` positions), then read the (equally long) suffixes."""
        cuts = [f.cut(n) for f, n in zip(forks, n_valid)]
        width = max(cuts)
        cache = DynamicCache()
        for layer in range(len(forks[0].keys)):
            cache.update(_left_pad_rows([f.keys[layer][:, :c] for f, c in zip(forks, cuts)], width, 1),
                         _left_pad_rows([f.values[layer][:, :c] for f, c in zip(forks, cuts)], width, 1), layer)
        ids = torch.as_tensor([list(s) for s in suffixes], dtype=torch.long, device=self.device)
        mask = _left_pad_rows([f.mask[:c] for f, c in zip(forks, cuts)], width, 0)
        mask = torch.cat([mask, torch.ones_like(ids)], 1)
        if self.encoder_decoder:
            cross = DynamicCache()
            for layer in range(len(forks[0].cross)):  # type: ignore[arg-type]
                cross.update(torch.stack([f.cross[layer][0] for f in forks]),  # type: ignore[index]
                             torch.stack([f.cross[layer][1] for f in forks]), layer)  # type: ignore[index]
            self.cache = EncoderDecoderCache(cache, cross)
            self.row_enc = torch.stack([f.enc for f in forks])  # type: ignore[misc]
            self.row_enc_mask = torch.stack([f.enc_mask for f in forks])  # type: ignore[misc]
            self.mask = None if bool(mask.all()) else mask
            return self._dec(ids)
        self.cache, self.mask = cache, mask
        self.pos = torch.as_tensor(n_valid, device=self.device).unsqueeze(1) + torch.arange(ids.shape[1],
                                                                                          device=self.device)
        return self._causal(ids, self.pos)

    def _batch(self) -> dict:
        """The running batch's state (set aside while :meth:`start` opens new rows) and its row count."""
        state = {k: getattr(self, k, None) for k in ("cache", "mask", "pos", "row_enc", "row_enc_mask")}
        rows = state["row_enc" if self.encoder_decoder else "pos"]
        return {"rows": 0 if state["cache"] is None else int(rows.shape[0]), **state}

    def _prepend(self, old: dict) -> None:
        """Put the rows of a set-aside batch ``old`` before the current rows (one time axis, left-padded)."""
        n_new = self._batch()["rows"]
        new_self, old_self = self.cache, old["cache"]
        if self.encoder_decoder:
            new_self, old_self = self.cache.self_attention_cache, old["cache"].self_attention_cache
            for lo, ln in zip(old["cache"].cross_attention_cache.layers, self.cache.cross_attention_cache.layers):
                ln.keys, ln.values = torch.cat([lo.keys, ln.keys]), torch.cat([lo.values, ln.values])
            self.row_enc = torch.cat([old["row_enc"], self.row_enc])
            self.row_enc_mask = torch.cat([old["row_enc_mask"], self.row_enc_mask])
        else:
            self.pos = torch.cat([old["pos"][:, -1:], self.pos[:, -1:]])
        t_old, t_new = old_self.get_seq_length(), new_self.get_seq_length()
        t = max(t_old, t_new)
        for lo, ln in zip(old_self.layers, new_self.layers):
            ln.keys = _stack_left_padded(lo.keys, ln.keys, t, -2)
            ln.values = _stack_left_padded(lo.values, ln.values, t, -2)
        if old["mask"] is None and self.mask is None and t_old == t_new:
            return  # no padding anywhere: steps stay maskless

        def full(mask: torch.Tensor | None, rows: int, length: int) -> torch.Tensor:
            return torch.ones((rows, length), dtype=torch.long, device=self.device) if mask is None else mask

        self.mask = _stack_left_padded(full(old["mask"], old["rows"], t_old), full(self.mask, n_new, t_new), t, -1)

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        """Feed one token per row; features of the next token."""
        if self.mask is not None:
            self.mask = torch.cat([self.mask, torch.ones_like(self.mask[:, :1])], dim=1)
        ids = tokens.to(self.device).unsqueeze(1)
        if self.encoder_decoder:
            return self._dec(ids)
        self.pos = self.pos[:, -1:] + 1
        return self._causal(ids, self.pos)

    def select(self, rows: torch.Tensor, same_prompt: bool = False) -> None:
        """Keep (and reorder or repeat) rows: beam search's reordering, or dropping finished rows.

        ``same_prompt``: every row is replaced by a row of the same prompt (beams of one group), so
        an encoder-decoder's cross-attention cache and encoder states need no reordering."""
        rows = rows.to(self.device)
        if self.encoder_decoder and same_prompt:
            self.cache.self_attention_cache.reorder_cache(rows)
        else:
            self.cache.reorder_cache(rows)
        if self.mask is not None:
            self.mask = self.mask.index_select(0, rows)
        if not self.encoder_decoder:
            self.pos = self.pos.index_select(0, rows)
        elif not same_prompt:
            self.row_enc = self.row_enc.index_select(0, rows)
            self.row_enc_mask = self.row_enc_mask.index_select(0, rows)

    def _dec(self, ids: torch.Tensor) -> torch.Tensor:
        if self.restricted:
            out = self.model.get_decoder()(
                input_ids=ids, attention_mask=self.mask, encoder_hidden_states=self.row_enc,
                encoder_attention_mask=self.row_enc_mask, past_key_values=self.cache, use_cache=True,
            )
            return out.last_hidden_state[:, -1] * self.scale
        out = self.model(
            encoder_outputs=BaseModelOutput(last_hidden_state=self.row_enc), attention_mask=self.row_enc_mask,
            decoder_input_ids=ids, decoder_attention_mask=self.mask, past_key_values=self.cache, use_cache=True,
        )
        return out.logits[:, -1]

    def _causal(self, ids: torch.Tensor, pos: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        mask = self.mask if mask is None else mask
        kw = dict(input_ids=ids, attention_mask=mask, position_ids=pos, past_key_values=self.cache, use_cache=True)
        if self.restricted:
            return self.model.base_model(**kw).last_hidden_state[:, -1]
        if self._keep_arg:
            kw["logits_to_keep"] = 1
        return self.model(**kw).logits[:, -1]

    # ------------------------------------------------------------------------------ teacher forcing

    def teacher_force(self, prompt_idx: torch.Tensor, rows: Sequence[Sequence[int]]) -> torch.Tensor:
        """Features ``[R, T, F]``: position ``t`` of row ``r`` predicts ``rows[r][t]`` (differentiable)."""
        prompt_idx = prompt_idx.to(self.device)
        width = max(len(r) for r in rows)
        if self.encoder_decoder:
            dec, mask = _pad([[self.decoder_start, *r[:-1]] for r in rows], self.pad_id, False, self.device)
            if self.through_forward:  # the encoder runs inside the wrapper's forward, once per row
                ids, ids_mask = _pad([self.prompt_ids[int(p)] for p in prompt_idx.tolist()], self.pad_id, False,
                                     self.device)
                return self.outer(input_ids=ids, attention_mask=ids_mask, decoder_input_ids=dec,
                                  decoder_attention_mask=mask).logits
            enc = self.enc_hidden.index_select(0, prompt_idx)
            enc_mask = self.enc_mask.index_select(0, prompt_idx)
            if self.restricted:
                h = self.model.get_decoder()(input_ids=dec, attention_mask=mask, encoder_hidden_states=enc,
                                             encoder_attention_mask=enc_mask).last_hidden_state
                return h * self.scale
            return self.model(encoder_outputs=BaseModelOutput(last_hidden_state=enc), attention_mask=enc_mask,
                              decoder_input_ids=dec, decoder_attention_mask=mask).logits
        prompts = [self.prompt_ids[int(p)] for p in prompt_idx.tolist()]
        n_prompt = max(len(p) for p in prompts)
        pids, pmask = _pad(prompts, self.pad_id, True, self.device)
        rids, rmask = _pad(rows, self.pad_id, False, self.device)
        ids, mask = torch.cat([pids, rids], 1), torch.cat([pmask, rmask], 1)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        kw = dict(input_ids=ids, attention_mask=mask, position_ids=pos)
        if self.restricted:
            h = self.model.base_model(**kw).last_hidden_state
            return h[:, n_prompt - 1 : n_prompt - 1 + width]
        if self.through_forward:
            return self.outer(**kw).logits[:, n_prompt - 1 : n_prompt - 1 + width]
        if self._keep_arg:
            return self.model(**kw, logits_to_keep=width + 1).logits[:, :width]
        return self.model(**kw).logits[:, n_prompt - 1 : n_prompt - 1 + width]
