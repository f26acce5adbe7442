"""Teacher-forced features of an HF planner: every position of given rows in one forward pass.

:class:`TeacherForcing` is the scoring half of :class:`constrained_decoding.runner.PlannerRunner`
(which inherits it): :meth:`TeacherForcing.teacher_force` computes the features the decoding steps
computed, for :func:`constrained_decoding.logprobs.plan_logprobs` to score rows with gradients. One
method per way of calling the model: an encoder-decoder reading its prompts' encoder states, a
causal model reading prompts then rows, or continuing the distinct prompts' shared cache.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers.cache_utils import DynamicCache
from transformers.modeling_outputs import BaseModelOutput

from constrained_decoding.gathered_rows import gathered_rows
from constrained_decoding.kv_rows import SharedPrefix
from constrained_decoding.uploads import upload

__all__ = ["TeacherForcing", "pad_rows", "returned_cache"]


def returned_cache(out):
    """The KV cache a forward with ``use_cache=True`` returned (``out.cache``, or ``out.past_key_values``
    where transformers has not renamed it; the old name warns where it has)."""
    return out["cache"] if "cache" in out else out.past_key_values


def pad_rows(seqs: Sequence[Sequence[int]], value: int, left: bool, device) -> tuple[torch.Tensor, torch.Tensor]:
    """``seqs`` padded with ``value`` to one length (on the left or right), and their mask: one upload each."""
    n = max(len(s) for s in seqs)
    ids = [[value] * (n - len(s)) + list(s) if left else list(s) + [value] * (n - len(s)) for s in seqs]
    mask = [[0] * (n - len(s)) + [1] * len(s) if left else [1] * len(s) + [0] * (n - len(s)) for s in seqs]
    return upload(ids, device), upload(mask, device)


class TeacherForcing:
    """Teacher forcing over a runner's prompts (the attributes are :class:`PlannerRunner`'s)."""

    def gather_rows(self, vocab: torch.Tensor, rows: Sequence[Sequence[int]]) -> None:
        """Before teacher-forcing ``rows`` under grammars emitting ``vocab``: read the token matrix's
        rows they need once (:mod:`constrained_decoding.gathered_rows`; where it applies: an
        encoder-decoder planner with a restricted head tied to its input embedding, gradients on)."""
        if self.encoder_decoder and self.restricted and not self.through_forward:
            tokens = torch.as_tensor([t for r in rows for t in r] + [self.decoder_start, self.pad_id], dtype=torch.long)
            self.gathered = gathered_rows(self.model, self.head.weight, [vocab, tokens])

    def teacher_force(self, prompt_idx: torch.Tensor, rows: Sequence[Sequence[int]]) -> torch.Tensor:
        """Features ``[R, T, F]``: position ``t`` of row ``r`` predicts ``rows[r][t]`` (differentiable).

        One forward over the prompts and rows, no cache; the model is called the way decoding calls
        it (decoder / body for a restricted head, the full model otherwise, the outer wrapper's own
        ``forward`` with ``through_forward``). ``share_prompt`` (causal models, not
        ``through_forward``): when several rows read one prompt, the distinct prompts are read
        once (:meth:`shared_prefix`, with gradients) and the rows continue their cache."""
        prompt_idx = prompt_idx.to(self.device)
        if self.encoder_decoder:
            return self._teacher_force_encoder_decoder(prompt_idx, rows)
        if self.share_prompt and not self.through_forward and (
                self._prefix is not None or len(rows) > len({self.canonical[p] for p in prompt_idx.tolist()})):
            return self._teacher_force_shared(prompt_idx, rows)  # (a prompt read by one row: no pass to save)
        return self._teacher_force_causal(prompt_idx, rows)

    def _teacher_force_encoder_decoder(self, prompt_idx: torch.Tensor, rows: Sequence[Sequence[int]]) -> torch.Tensor:
        """Encoder-decoder :meth:`teacher_force`: the rows after the decoder start, reading their prompts'
        encoder states (read once per prompt, or by the wrapper's forward once per row)."""
        dec, mask = pad_rows([[self.decoder_start, *r[:-1]] for r in rows], self.pad_id, False, self.device)
        if self.through_forward:  # the encoder runs inside the wrapper's forward, once per row
            prompts = [self.prompt_ids[int(p)] for p in prompt_idx.tolist()]
            ids, ids_mask = pad_rows(prompts, self.pad_id, False, self.device)
            return self.outer(input_ids=ids, attention_mask=ids_mask, decoder_input_ids=dec,
                              decoder_attention_mask=mask).logits
        enc = self.enc_hidden.index_select(0, prompt_idx)  # type: ignore[union-attr]
        enc_mask = self.enc_mask.index_select(0, prompt_idx)  # type: ignore[union-attr]
        if self.restricted:
            tokens = dict(input_ids=dec) if self.gathered is None else dict(inputs_embeds=self.gathered.embed(dec))
            h = self.model.get_decoder()(**tokens, attention_mask=mask, encoder_hidden_states=enc,
                                         encoder_attention_mask=enc_mask).last_hidden_state
            return h * self.head.scale
        return self.model(encoder_outputs=BaseModelOutput(last_hidden_state=enc), attention_mask=enc_mask,
                          decoder_input_ids=dec, decoder_attention_mask=mask).logits

    def _teacher_force_causal(self, prompt_idx: torch.Tensor, rows: Sequence[Sequence[int]]) -> torch.Tensor:
        """Causal :meth:`teacher_force` in one pass: left-padded prompts then right-padded rows; position
        ``t`` of a row is read at column ``n_prompt - 1 + t``."""
        prompts = [self.prompt_ids[int(p)] for p in prompt_idx.tolist()]
        width, n_prompt = max(len(r) for r in rows), max(len(p) for p in prompts)
        pids, pmask = pad_rows(prompts, self.pad_id, True, self.device)
        rids, rmask = pad_rows(rows, self.pad_id, False, self.device)
        ids, mask = torch.cat([pids, rids], 1), torch.cat([pmask, rmask], 1)
        kw = dict(input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp(min=0))
        if self.restricted:
            return self.model.base_model(**kw).last_hidden_state[:, n_prompt - 1 : n_prompt - 1 + width]
        if self.through_forward:
            return self.outer(**kw).logits[:, n_prompt - 1 : n_prompt - 1 + width]
        if self._keep_arg:
            return self.model(**kw, logits_to_keep=width + 1).logits[:, :width]
        return self.model(**kw).logits[:, n_prompt - 1 : n_prompt - 1 + width]

    def _teacher_force_shared(self, prompt_idx: torch.Tensor, rows: Sequence[Sequence[int]]) -> torch.Tensor:
        """Causal :meth:`teacher_force` reading each distinct prompt once: the rows continue copies of
        :meth:`shared_prefix`'s cache (the prompts but their last token, with gradients) and read
        only ``[last prompt token, *row[:-1]]``. Same columns, mask and positions as the full
        forward's (the prompts left-padded to one width), so the same features."""
        prefix = self.shared_prefix()
        which = torch.as_tensor([prefix.row_of[self.canonical[p]] for p in prompt_idx.tolist()], device=self.device)
        width = max(len(r) for r in rows)
        tail, tail_mask = pad_rows([[self.prompt_ids[int(p)][-1], *r[:-1]] for p, r in zip(prompt_idx.tolist(), rows)],
                               self.pad_id, False, self.device)
        tail, tail_mask = tail[:, :width], tail_mask[:, :width]
        mask = torch.cat([prefix.mask.index_select(0, which), tail_mask], 1)
        cache = DynamicCache()
        for layer, (k, v) in enumerate(zip(prefix.keys, prefix.values)):
            cache.update(k.index_select(0, which), v.index_select(0, which), layer)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)[:, prefix.mask.shape[1] :]
        kw = dict(input_ids=tail, attention_mask=mask, position_ids=pos)
        if self.restricted:
            body = self.model.base_model
            return body(**kw, **self._with_cache(body, cache)).last_hidden_state
        return self.model(**kw, **self._with_cache(self.model, cache)).logits

    def expect_rows(self, prompt_idx: Sequence[int]) -> None:
        """Rows of these prompts will be teacher-forced (in several calls, say length buckets): when
        several read one prompt, read the distinct prompts once now, for every call to continue."""
        if (self.share_prompt and not self.through_forward and not self.encoder_decoder
                and len(prompt_idx) > len({self.canonical[int(p)] for p in prompt_idx})):
            self.shared_prefix()

    def shared_prefix(self) -> SharedPrefix:
        """The distinct prompts but their last token, left-padded to one width and read in one
        forward pass (with gradients unless disabled), as a cache the rows copy; made once."""
        if self._prefix is None:
            distinct = sorted(set(self.canonical))
            ids, mask = pad_rows([self.prompt_ids[u][:-1] or [self.pad_id] for u in distinct], self.pad_id, True,
                             self.device)
            for i, u in enumerate(distinct):
                if len(self.prompt_ids[u]) < 2:
                    mask[i] = 0  # a one-token prompt: an empty prefix (one masked column)
            kw = dict(input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp(min=0),
                      use_cache=True)
            if self._keep_arg and not self.restricted:
                out = self.model(**kw, logits_to_keep=1)
            else:
                out = self.model.base_model(**kw)
            layers = returned_cache(out).layers
            self._prefix = SharedPrefix([x.keys for x in layers], [x.values for x in layers], mask,
                                        {u: i for i, u in enumerate(distinct)})
        return self._prefix
