"""Step-wise next-token features of an HF planner with a KV cache, and teacher-forced features.

:class:`PlannerRunner` hides the difference between encoder-decoder (T5) and causal (LLaMA-style)
models and PEFT wrappers. It returns *features* per row; :meth:`PlannerRunner.allowed_logits`
(:class:`constrained_decoding.head.OutputHead`) turns them into the logits of a few allowed
token ids per row. The running rows' cache, mask and positions are one
:class:`constrained_decoding.kv_rows.RowBatch` (``runner.batch``, None before :meth:`start`).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from torch import nn
from transformers.cache_utils import DynamicCache, EncoderDecoderCache
from transformers.modeling_outputs import BaseModelOutput

from constrained_decoding.cross_attention import filled_layer, prompt_cross_attention
from constrained_decoding.encoder_memo import EncoderMemo
from constrained_decoding.gathered_rows import GatheredRows, gathered_rows
from constrained_decoding.head import HeadMode, OutputHead
from constrained_decoding.kv_rows import RowBatch, RowFork, SharedPrefix
from constrained_decoding.prompt_attention import PromptKV, decoder_configs, reading_prompts
from constrained_decoding.prompts import encode_prompts
from constrained_decoding.slot_rows import SlotBatch
from constrained_decoding.uploads import upload

if TYPE_CHECKING:
    from constrained_decoding.tables import StateTables

__all__ = ["PlannerRunner", "RowFork", "unwrap_model"]

RESTACKED_JOINS = 8
"""Joins a batch takes by re-stacking before it moves into slots (``slot_cache``): moving costs about
one re-stacking plus the buffers' first writes, which a batch joined a few times does not earn back.
Plain sampling joins 1-7 times on travel (``benchmarks/decoding_growth.py --k 1 --queries 8``), beam
search 3 times; stochastic beam search joins 66-182 times per call and gains most (0.18-0.48x the
re-stacking CPU on travel, ``benchmarks/distinct_sampling.py``)."""


def unwrap_model(model: nn.Module) -> nn.Module:
    """The HF model inside a PEFT wrapper (its LoRA layers stay active), else the model itself."""
    get_base = getattr(model, "get_base_model", None)
    if callable(get_base) and hasattr(model, "peft_config"):
        return get_base()
    return model


def cache_keyword(module: nn.Module) -> str:
    """The keyword ``module.forward`` takes a KV cache by: ``cache`` where transformers has renamed
    it (``past_key_values`` then warns FutureWarning: deprecated), else ``past_key_values`` (the
    name up to then, e.g. transformers 4.56)."""
    return "cache" if "cache" in inspect.signature(module.forward).parameters else "past_key_values"


def returned_cache(out):
    """The KV cache a forward with ``use_cache=True`` returned (``out.cache``, or ``out.past_key_values``
    where transformers has not renamed it; the old name warns where it has)."""
    return out["cache"] if "cache" in out else out.past_key_values


def _host(idx: Sequence[int] | torch.Tensor) -> list[int]:
    """Row indices on the host (a tensor's are read: callers make them there)."""
    return idx.tolist() if isinstance(idx, torch.Tensor) else [int(i) for i in idx]


def _pad(seqs: Sequence[Sequence[int]], value: int, left: bool, device) -> tuple[torch.Tensor, torch.Tensor]:
    """``seqs`` padded with ``value`` to one length (on the left or right), and their mask: one upload each."""
    n = max(len(s) for s in seqs)
    ids = [[value] * (n - len(s)) + list(s) if left else list(s) + [value] * (n - len(s)) for s in seqs]
    mask = [[0] * (n - len(s)) + [1] * len(s) if left else [1] * len(s) + [0] * (n - len(s)) for s in seqs]
    return upload(ids, device), upload(mask, device)


class PlannerRunner:
    """One batch of prompts and the rows decoded from them (see the module docstring)."""

    def __init__(self, model: nn.Module, tokenizer, prompts: Sequence[str], *, pad_id: int,
                 through_forward: bool = False, head: HeadMode = "auto", share_prompt: bool = True,
                 encoder_memo: EncoderMemo | None = None, slot_cache: bool = True):
        """``through_forward``: :meth:`teacher_force` calls ``model``'s own ``forward`` (the PEFT /
        FSDP wrapper's, full-vocabulary logits) and never a sub-module — what an FSDP-sharded model
        needs for its hooks; no encoder pass or head probe happens here then. ``head``: the
        output-layer path (:mod:`constrained_decoding.head`: ``auto``, ``restricted``, ``full``).
        ``share_prompt``: each distinct prompt (equal token ids) is read once — one encoder row, or
        one causal prefix whose cache its rows copy — however many rows read it; ``False`` reads
        the prompt in every row (the reference the tests compare with). ``encoder_memo``
        (encoder-decoder models, not ``through_forward``): the encoder states come from it (each
        distinct prompt read once per memo, with gradients; decoding takes them detached).
        ``slot_cache``: rows that join a running batch (after its first :data:`RESTACKED_JOINS`
        joins) go into its slots (:class:`constrained_decoding.slot_rows.SlotBatch`: the running rows
        are not copied); ``False`` re-stacks the whole running cache at every join (the reference the
        tests compare with)."""
        self.model = unwrap_model(model)
        self.outer = model
        self.through_forward = through_forward
        cfg = self.model.config
        self.encoder_decoder = bool(getattr(cfg, "is_encoder_decoder", False))
        self.device = next(self.model.parameters()).device
        self.pad_id = pad_id
        self.decoder_start: int | None = None
        if self.encoder_decoder:
            start = cfg.decoder_start_token_id
            self.decoder_start = cfg.pad_token_id if start is None else start
            if self.decoder_start is None:
                raise ValueError("the model config has neither decoder_start_token_id nor pad_token_id")
        self.head = OutputHead(self.model, self.encoder_decoder, "full" if through_forward else head)
        self.restricted = self.head.restricted
        self.prompt_ids = encode_prompts(tokenizer, prompts, self.encoder_decoder)
        self.share_prompt = share_prompt
        self.slot_cache = slot_cache
        # per prompt, the first prompt with the same token ids (itself when not sharing)
        first: dict[tuple[int, ...], int] = {}
        self.canonical = [first.setdefault(tuple(ids), i) if share_prompt else i
                          for i, ids in enumerate(self.prompt_ids)]
        self._keep_arg = "logits_to_keep" in inspect.signature(self.model.forward).parameters
        self._cache_kw: dict[type, str] = {}  # per module class called with a cache: its keyword (cache_keyword)
        self.enc_hidden: torch.Tensor | None = None  # encoder-decoder: encoder states and mask per prompt
        self.enc_mask: torch.Tensor | None = None
        if self.encoder_decoder and not through_forward:
            distinct = sorted(set(self.canonical))
            if encoder_memo is not None:
                hidden, mask = encoder_memo.states(self.model, [self.prompt_ids[u] for u in distinct], pad_id,
                                                   detach=not torch.is_grad_enabled())
            else:
                ids, mask = _pad([self.prompt_ids[u] for u in distinct], pad_id, left=False, device=self.device)
                hidden = self.model.get_encoder()(input_ids=ids, attention_mask=mask).last_hidden_state
            if len(distinct) < len(self.canonical):  # the encoder rows copied to every prompt that reads them
                where = {u: i for i, u in enumerate(distinct)}
                expand = torch.as_tensor([where[c] for c in self.canonical], device=self.device)
                hidden, mask = hidden.index_select(0, expand), mask.index_select(0, expand)
            self.enc_hidden, self.enc_mask = hidden, mask
        self._prompt_kv: PromptKV | None = None  # encoder-decoder: the prompts' cross-attention K/V (made once)
        self._cross: DynamicCache | None = None  # the same as the cross-attention cache every batch shares
        self._configs: list = []  # the decoder's attention configs (prompt_attention.reading_prompts)
        self._prefix: SharedPrefix | None = None  # causal teacher forcing: the distinct prompts' cache (made once)
        self.gathered: GatheredRows | None = None  # teacher forcing: the token rows a scoring call reads (gather_rows)
        self.batch: RowBatch | SlotBatch | None = None  # the running rows (see start / add_rows / step / select)

    def allowed_logits(self, feats: torch.Tensor, tables: StateTables, state: torch.Tensor) -> torch.Tensor:
        """Logits (float32) ``[..., D]`` of the tokens grammar states ``state[...]`` allow (see :class:`OutputHead`)."""
        return self.head.allowed_logits(feats, tables, state, self.gathered)

    def gather_rows(self, vocab: torch.Tensor, rows: Sequence[Sequence[int]]) -> None:
        """Before teacher-forcing ``rows`` under grammars emitting ``vocab``: read the token matrix's
        rows they need once (:mod:`constrained_decoding.gathered_rows`; where it applies: an
        encoder-decoder planner with a restricted head tied to its input embedding, gradients on)."""
        if self.encoder_decoder and self.restricted and not self.through_forward:
            tokens = torch.as_tensor([t for r in rows for t in r] + [self.decoder_start, self.pad_id], dtype=torch.long)
            self.gathered = gathered_rows(self.model, self.head.weight, [vocab, tokens])

    def context_len(self, prompt: int) -> int:
        """Cache positions a row holds before its own tokens: the decoder start (T5) or its prompt."""
        return 1 if self.encoder_decoder else len(self.prompt_ids[prompt])

    # ------------------------------------------------------------------------- decoding with cache

    def start(self, prompt_idx: Sequence[int] | torch.Tensor, prefixes: Sequence[Sequence[int]]) -> torch.Tensor:
        """Open rows (a new batch): row ``r`` reads prompt ``prompt_idx[r]`` then ``prefixes[r]``; features of the next
        token."""
        prompts = _host(prompt_idx)
        if self.encoder_decoder:
            ids, mask = _pad([[self.decoder_start, *p] for p in prefixes], self.pad_id, True, self.device)
            # rows of equal length need no decoder mask (and HF builds none: cheaper steps); a row reads
            # its prompt's cross-attention K/V (computed once per prompt) where they lie
            self.batch = RowBatch(EncoderDecoderCache(DynamicCache(), self._prompt_cross()),
                                  None if len({len(p) for p in prefixes}) == 1 else mask, prompts=prompts)
            return self._dec(ids)
        rows = [self.canonical[p] for p in prompts]
        uniq = sorted(set(rows))
        if not self.share_prompt or min(len(self.prompt_ids[u]) for u in uniq) < 2:  # prefill each row whole
            ids, mask = _pad([self.prompt_ids[p] + list(q) for p, q in zip(rows, prefixes)], self.pad_id, True,
                             self.device)
            self.batch = RowBatch(DynamicCache(), mask, pos=(mask.cumsum(-1) - 1).clamp(min=0))
            return self._causal(ids)
        # the prompts (but their last token) once per distinct prompt, then the cache is copied to the rows
        head, head_mask = _pad([self.prompt_ids[u][:-1] for u in uniq], self.pad_id, True, self.device)
        self.batch = RowBatch(DynamicCache(), head_mask, pos=(head_mask.cumsum(-1) - 1).clamp(min=0))
        self._causal(head)
        where = {u: i for i, u in enumerate(uniq)}
        expand = torch.as_tensor([where[p] for p in rows], device=self.device)
        self.batch.cache.reorder_cache(expand)
        tail, tail_mask = _pad([[self.prompt_ids[p][-1], *q] for p, q in zip(rows, prefixes)], self.pad_id, True,
                               self.device)
        self.batch.mask = torch.cat([head_mask.index_select(0, expand), tail_mask], 1)
        self.batch.pos = (self.batch.mask.cumsum(-1) - 1).clamp(min=0)[:, head.shape[1] :]
        return self._causal(tail)

    def _prompt_cross(self) -> DynamicCache:
        """Encoder-decoder models: the cross-attention cache of the prompts' keys and values (one row
        per prompt, computed once: :mod:`constrained_decoding.cross_attention`), which every batch's
        rows read by their prompt (:mod:`constrained_decoding.prompt_attention`)."""
        if self._cross is None:
            decoder = self.model.get_decoder()
            kv = prompt_cross_attention(decoder, self.enc_hidden, self.enc_mask,  # type: ignore[arg-type]
                                        self.decoder_start, cache_keyword(decoder))  # type: ignore[arg-type]
            self._prompt_kv = PromptKV.of(kv, self.enc_mask, self.enc_hidden.shape[-1])  # type: ignore[arg-type,union-attr]
            self._cross = DynamicCache()
            self._cross.layers = [filled_layer(k, v) for k, v in kv]
            self._configs = decoder_configs(decoder)
        return self._cross

    def add_rows(self, prompt_idx: Sequence[int] | torch.Tensor, prefixes: Sequence[Sequence[int]],
                 copies: Sequence[int] | torch.Tensor | None = None,
                 forks: Sequence[tuple[RowFork, int] | None] | None = None) -> torch.Tensor:
        """Open rows (as :meth:`start`) that join the running batch after its rows; their features.

        Continuous batching: rows can join while others decode, so passes stay full. The new rows
        are prefilled in a cache of their own, then both caches are left-padded to one time axis
        (zeros, masked out) and concatenated along the batch. Relative (T5) and rotary (LLaMA)
        positions stay right: the mask hides the padding and position ids continue per row.
        ``copies``: row ``r`` of the joining rows is prefilled row ``copies[r]`` (identical rows
        prefilled once). ``forks``: per row, ``(fork, shared)`` where the fork holds the row's context
        then (at least) the first ``shared`` tokens of its prefix (a finished row the new row
        continues), or None: such a row starts from a copy of the fork and prefills only the rest.
        With ``slot_cache``, after :data:`RESTACKED_JOINS` such joins the running batch becomes a
        :class:`SlotBatch` and new rows are copied into its free slots instead."""
        old = self.batch if self.batch is not None and self.batch.rows else None
        prompts = _host(prompt_idx)
        keep = self._fork_plan(prefixes, forks)
        fresh = [i for i, k in enumerate(keep) if k == 0]
        forked = [i for i, k in enumerate(keep) if k]
        feats = []
        if fresh:
            feats.append(self.start([prompts[i] for i in fresh], [prefixes[i] for i in fresh]))
        if forked:
            first = self.batch if fresh else None
            parts = [forks[i] for i in forked]  # type: ignore[index]
            n_valid = [self.context_len(prompts[i]) + keep[i] for i in forked]
            feats.append(self._start_forked([f for f, _ in parts], n_valid, [prefixes[i][keep[i] :] for i in forked],
                                            [prompts[i] for i in forked]))
            if first is not None:
                self.batch.prepend(first)
        feats = torch.cat(feats) if len(feats) > 1 else feats[0]
        where = [0] * len(keep)
        for i, r in enumerate(fresh + forked):
            where[r] = i
        if copies is not None:
            where = [where[c] for c in _host(copies)]
        if copies is not None or forked and fresh:
            rows = upload(where, self.device)
            self.select(rows, host_rows=where)
            feats = feats.index_select(0, rows)
        if old is not None:
            if self.slot_cache and (isinstance(old, SlotBatch) or old.joins >= RESTACKED_JOINS):
                self.batch = SlotBatch.joined(old, self.batch)  # type: ignore[arg-type]
            else:
                self.batch.prepend(old)  # type: ignore[union-attr,arg-type]
                self.batch.joins = old.joins + 1  # type: ignore[union-attr]
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

    def _start_forked(self, forks: Sequence[RowFork], n_valid: Sequence[int], suffixes: Sequence[Sequence[int]],
                      prompts: list[int]) -> torch.Tensor:
        """Open rows (a new batch) of ``prompts`` from forks (their first ``n_valid[r]`` positions), then read
        the (equally long) suffixes; features of the next token."""
        cross = self._prompt_cross() if self.encoder_decoder else None
        self.batch = RowBatch.from_forks(forks, n_valid, len(suffixes[0]), cross, prompts)
        ids = torch.as_tensor([list(s) for s in suffixes], dtype=torch.long, device=self.device)
        return self._dec(ids) if self.encoder_decoder else self._causal(ids)

    def fork(self, row: int, n_valid: int) -> RowFork:
        """Running row ``row``'s cache up to its first ``n_valid`` positions (a copy: see :class:`RowFork`)."""
        return self._running().fork(row, n_valid)

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        """Feed one token per row; features of the next token."""
        self._running().advance()
        ids = tokens.to(self.device).unsqueeze(1)
        return self._dec(ids) if self.encoder_decoder else self._causal(ids)

    def select(self, rows: torch.Tensor, same_prompt: bool = False, host_rows: Sequence[int] | None = None,
               prompts_of: Sequence[int] | None = None) -> None:
        """Keep (and reorder or repeat) rows: beam search's reordering, or dropping finished rows.

        ``same_prompt``: every row is replaced by a row of the same prompt (beams of one group), so
        an encoder-decoder's rows keep their prompts. ``host_rows``: ``rows`` as the caller knows
        them on the host, if it does (a slot batch keeps its row -> slot map on the host and would
        otherwise read ``rows`` from the device); else ``prompts_of``: per kept row, a row of the
        same prompt, on the host (so a re-stacked batch need not read its rows' prompts back)."""
        b = self._running()
        if isinstance(b, SlotBatch):
            b.select(rows.to(self.device), same_prompt, host_rows)
        else:
            b.select(rows.to(self.device), same_prompt, host_rows, prompts_of)

    def _running(self) -> RowBatch | SlotBatch:
        if self.batch is None:
            raise RuntimeError("no rows are running: call start() first")
        return self.batch

    def _with_cache(self, module: nn.Module, cache) -> dict:
        """``{keyword: cache, "use_cache": True}`` for a call of ``module`` (see :func:`cache_keyword`)."""
        kind = type(module)
        if kind not in self._cache_kw:
            self._cache_kw[kind] = cache_keyword(module)
        return {self._cache_kw[kind]: cache, "use_cache": True}

    def _dec(self, ids: torch.Tensor) -> torch.Tensor:
        b = self._running()
        if isinstance(b, SlotBatch):  # the forward runs over slots
            out = self._dec_rows(b, b.inputs(ids))
            b.commit(ids.shape[1])
            return b.outputs(out)
        return self._dec_rows(b, ids)

    def _dec_rows(self, b: RowBatch | SlotBatch, ids: torch.Tensor) -> torch.Tensor:
        kv = self._prompt_kv
        states = kv.states(ids.shape[0])  # type: ignore[union-attr]  (the rows read the prompts' K/V instead)
        with reading_prompts(self._configs) as own:
            reads = dict(prompt_rows=b.layout(kv), model_attention=own)  # type: ignore[arg-type]
            if self.restricted:
                decoder = self.model.get_decoder()
                out = decoder(input_ids=ids, attention_mask=b.mask, encoder_hidden_states=states,
                              **self._with_cache(decoder, b.cache), **reads)
                return out.last_hidden_state[:, -1] * self.head.scale
            out = self.model(encoder_outputs=BaseModelOutput(last_hidden_state=states), decoder_input_ids=ids,
                             decoder_attention_mask=b.mask, **self._with_cache(self.model, b.cache), **reads)
        return out.logits[:, -1]

    def _causal(self, ids: torch.Tensor) -> torch.Tensor:
        b = self._running()
        if isinstance(b, SlotBatch):
            out = self._causal_rows(b, b.inputs(ids))
            b.commit(ids.shape[1])
            return b.outputs(out)
        return self._causal_rows(b, ids)

    def _causal_rows(self, b: RowBatch | SlotBatch, ids: torch.Tensor) -> torch.Tensor:
        kw = dict(input_ids=ids, attention_mask=b.mask, position_ids=b.pos)
        if self.restricted:
            body = self.model.base_model
            return body(**kw, **self._with_cache(body, b.cache)).last_hidden_state[:, -1]
        kw.update(self._with_cache(self.model, b.cache))
        if self._keep_arg:
            kw["logits_to_keep"] = 1
        return self.model(**kw).logits[:, -1]

    # ------------------------------------------------------------------------------ teacher forcing

    def teacher_force(self, prompt_idx: torch.Tensor, rows: Sequence[Sequence[int]]) -> torch.Tensor:
        """Features ``[R, T, F]``: position ``t`` of row ``r`` predicts ``rows[r][t]`` (differentiable).

        One forward over the prompts and rows, no cache; the model is called the way decoding calls
        it (decoder / body for a restricted head, the full model otherwise, the outer wrapper's own
        ``forward`` with ``through_forward``). ``share_prompt`` (causal models, not
        ``through_forward``): when several rows read one prompt, the distinct prompts are read
        once (:meth:`shared_prefix`, with gradients) and the rows continue their cache."""
        prompt_idx = prompt_idx.to(self.device)
        prompts = [self.prompt_ids[int(p)] for p in prompt_idx.tolist()]
        if self.encoder_decoder:
            dec, mask = _pad([[self.decoder_start, *r[:-1]] for r in rows], self.pad_id, False, self.device)
            if self.through_forward:  # the encoder runs inside the wrapper's forward, once per row
                ids, ids_mask = _pad(prompts, self.pad_id, False, self.device)
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
        if self.share_prompt and not self.through_forward and (
                self._prefix is not None or len(rows) > len({self.canonical[p] for p in prompt_idx.tolist()})):
            return self._teacher_force_shared(prompt_idx, rows)  # (a prompt read by one row: no pass to save)
        # causal: left-padded prompts then right-padded rows; position t of a row is read at column n_prompt - 1 + t
        width, n_prompt = max(len(r) for r in rows), max(len(p) for p in prompts)
        pids, pmask = _pad(prompts, self.pad_id, True, self.device)
        rids, rmask = _pad(rows, self.pad_id, False, self.device)
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
        tail, tail_mask = _pad([[self.prompt_ids[int(p)][-1], *r[:-1]] for p, r in zip(prompt_idx.tolist(), rows)],
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
            ids, mask = _pad([self.prompt_ids[u][:-1] or [self.pad_id] for u in distinct], self.pad_id, True,
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
