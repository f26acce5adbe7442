"""Step-wise next-token features of an HF planner with a KV cache, and teacher-forced features.

:class:`PlannerRunner` hides the difference between encoder-decoder (T5) and causal (LLaMA-style)
models and PEFT wrappers. It returns *features* per row; :meth:`PlannerRunner.allowed_logits`
(:class:`constrained_decoding.head.OutputHead`) turns them into the logits of a few allowed
token ids per row. The running rows' cache, mask and positions are one row store
(``runner.batch``, None before :meth:`start`): a re-stacked
:class:`constrained_decoding.kv_rows.RowBatch` or, once its
:class:`~constrained_decoding.device_policy.DevicePolicy` says so, a
:class:`constrained_decoding.slot_rows.SlotBatch`; both take the same calls, so the runner never
asks which. How the model is called is picked once, by its kind (encoder-decoder or causal): the
decoding forward (:meth:`PlannerRunner._dec_rows` / :meth:`PlannerRunner._causal_rows`) and how a
new batch opens (:meth:`PlannerRunner.start`'s steps). Teacher forcing is
:class:`constrained_decoding.teacher_forcing.TeacherForcing`'s.
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
from constrained_decoding.device_policy import DEFAULT_POLICY, DevicePolicy
from constrained_decoding.encoder_memo import EncoderMemo
from constrained_decoding.gathered_rows import GatheredRows
from constrained_decoding.head import HeadMode, OutputHead
from constrained_decoding.kv_rows import RowBatch, RowFork, SharedPrefix
from constrained_decoding.prompt_attention import PromptKV, decoder_configs, reading_prompts
from constrained_decoding.prompts import encode_prompts
from constrained_decoding.slot_rows import SlotBatch, join_rows
from constrained_decoding.teacher_forcing import TeacherForcing, pad_rows
from constrained_decoding.uploads import upload

if TYPE_CHECKING:
    from constrained_decoding.tables import StateTables

__all__ = ["PlannerRunner", "RowFork", "unwrap_model"]


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


def _host(idx: Sequence[int] | torch.Tensor) -> list[int]:
    """Row indices on the host (a tensor's are read: callers make them there)."""
    return idx.tolist() if isinstance(idx, torch.Tensor) else [int(i) for i in idx]


class PlannerRunner(TeacherForcing):
    """One batch of prompts and the rows decoded from them (see the module docstring)."""

    def __init__(self, model: nn.Module, tokenizer, prompts: Sequence[str], *, pad_id: int,
                 through_forward: bool = False, head: HeadMode = "auto", share_prompt: bool = True,
                 encoder_memo: EncoderMemo | None = None, policy: DevicePolicy = DEFAULT_POLICY):
        """``through_forward``: :meth:`teacher_force` calls ``model``'s own ``forward`` (the PEFT /
        FSDP wrapper's, full-vocabulary logits) and never a sub-module — what an FSDP-sharded model
        needs for its hooks; no encoder pass or head probe happens here then. ``head``: the
        output-layer path (:mod:`constrained_decoding.head`: ``auto``, ``restricted``, ``full``).
        ``share_prompt``: each distinct prompt (equal token ids) is read once — one encoder row, or
        one causal prefix whose cache its rows copy — however many rows read it; ``False`` reads
        the prompt in every row (the reference the tests compare with). ``encoder_memo``
        (encoder-decoder models, not ``through_forward``): the encoder states come from it (each
        distinct prompt read once per memo, with gradients; decoding takes them detached).
        ``policy``: where the running rows live and how they move
        (:class:`~constrained_decoding.device_policy.DevicePolicy`): rows that join a running batch
        go into its slots after its first re-stacking joins (:class:`constrained_decoding.slot_rows.SlotBatch`:
        the running rows are not copied), or (``slots=False``) re-stack the whole running cache at every
        join (the reference the tests compare with)."""
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
        self.policy = policy
        # per prompt, the first prompt with the same token ids (itself when not sharing)
        first: dict[tuple[int, ...], int] = {}
        self.canonical = [first.setdefault(tuple(ids), i) if share_prompt else i
                          for i, ids in enumerate(self.prompt_ids)]
        self._keep_arg = "logits_to_keep" in inspect.signature(self.model.forward).parameters
        self._cache_kw: dict[type, str] = {}  # per module class called with a cache: its keyword (cache_keyword)
        self.enc_hidden: torch.Tensor | None = None  # encoder-decoder: encoder states and mask per prompt
        self.enc_mask: torch.Tensor | None = None
        if self.encoder_decoder and not through_forward:
            self.enc_hidden, self.enc_mask = self._encoder_states(encoder_memo)
        self._prompt_kv: PromptKV | None = None  # encoder-decoder: the prompts' cross-attention K/V (made once)
        self._cross: DynamicCache | None = None  # the same as the cross-attention cache every batch shares
        self._configs: list = []  # the decoder's attention configs (prompt_attention.reading_prompts)
        self._prefix: SharedPrefix | None = None  # causal teacher forcing: the distinct prompts' cache (made once)
        self.gathered: GatheredRows | None = None  # teacher forcing: the token rows a scoring call reads (gather_rows)
        self.batch: RowBatch | SlotBatch | None = None  # the running rows (see start / add_rows / step / select)

    def _encoder_states(self, encoder_memo: EncoderMemo | None) -> tuple[torch.Tensor, torch.Tensor]:
        """Encoder-decoder models: the encoder states and mask of every prompt, each distinct prompt
        read once (by ``encoder_memo`` if given) and copied to the prompts that share it."""
        distinct = sorted(set(self.canonical))
        if encoder_memo is not None:
            hidden, mask = encoder_memo.states(self.model, [self.prompt_ids[u] for u in distinct], self.pad_id,
                                               detach=not torch.is_grad_enabled())
        else:
            ids, mask = pad_rows([self.prompt_ids[u] for u in distinct], self.pad_id, left=False, device=self.device)
            hidden = self.model.get_encoder()(input_ids=ids, attention_mask=mask).last_hidden_state
        if len(distinct) < len(self.canonical):  # the encoder rows copied to every prompt that reads them
            where = {u: i for i, u in enumerate(distinct)}
            expand = torch.as_tensor([where[c] for c in self.canonical], device=self.device)
            hidden, mask = hidden.index_select(0, expand), mask.index_select(0, expand)
        return hidden, mask

    def allowed_logits(self, feats: torch.Tensor, tables: StateTables, state: torch.Tensor) -> torch.Tensor:
        """Logits (float32) ``[..., D]`` of the tokens grammar states ``state[...]`` allow (see :class:`OutputHead`)."""
        return self.head.allowed_logits(feats, tables, state, self.gathered)

    def context_len(self, prompt: int) -> int:
        """Cache positions a row holds before its own tokens: the decoder start (T5) or its prompt."""
        return 1 if self.encoder_decoder else len(self.prompt_ids[prompt])

    # ------------------------------------------------------------------------- decoding with cache

    def start(self, prompt_idx: Sequence[int] | torch.Tensor, prefixes: Sequence[Sequence[int]]) -> torch.Tensor:
        """Open rows (a new batch): row ``r`` reads prompt ``prompt_idx[r]`` then ``prefixes[r]``; features of the next
        token."""
        prompts = _host(prompt_idx)
        if self.encoder_decoder:
            return self._start_encoder_decoder(prompts, prefixes)
        rows = [self.canonical[p] for p in prompts]
        if not self.share_prompt or min(len(self.prompt_ids[u]) for u in set(rows)) < 2:
            return self._start_causal_whole(rows, prefixes)
        return self._start_causal_shared(rows, prefixes)

    def _start_encoder_decoder(self, prompts: list[int], prefixes: Sequence[Sequence[int]]) -> torch.Tensor:
        """:meth:`start` of an encoder-decoder: the decoder start then the prefixes, left-padded; rows of
        equal length need no decoder mask (and HF builds none: cheaper steps); a row reads its prompt's
        cross-attention K/V (computed once per prompt) where they lie."""
        ids, mask = pad_rows([[self.decoder_start, *p] for p in prefixes], self.pad_id, True, self.device)
        self.batch = RowBatch(EncoderDecoderCache(DynamicCache(), self._prompt_cross()),
                              None if len({len(p) for p in prefixes}) == 1 else mask, prompts=prompts)
        return self._dec(ids)

    def _start_causal_whole(self, rows: list[int], prefixes: Sequence[Sequence[int]]) -> torch.Tensor:
        """:meth:`start` of a causal model, each row prefilled whole: its prompt then its prefix."""
        ids, mask = pad_rows([self.prompt_ids[p] + list(q) for p, q in zip(rows, prefixes)], self.pad_id, True,
                             self.device)
        self.batch = RowBatch(DynamicCache(), mask, pos=(mask.cumsum(-1) - 1).clamp(min=0))
        return self._causal(ids)

    def _start_causal_shared(self, rows: list[int], prefixes: Sequence[Sequence[int]]) -> torch.Tensor:
        """:meth:`start` of a causal model whose rows share prompts: the prompts (but their last token) once
        per distinct prompt, then the cache is copied to the rows, which read the rest."""
        uniq = sorted(set(rows))
        head, head_mask = pad_rows([self.prompt_ids[u][:-1] for u in uniq], self.pad_id, True, self.device)
        self.batch = RowBatch(DynamicCache(), head_mask, pos=(head_mask.cumsum(-1) - 1).clamp(min=0))
        self._causal(head)
        where = {u: i for i, u in enumerate(uniq)}
        expand = torch.as_tensor([where[p] for p in rows], device=self.device)
        self.batch.cache.reorder_cache(expand)
        tail, tail_mask = pad_rows([[self.prompt_ids[p][-1], *q] for p, q in zip(rows, prefixes)], self.pad_id, True,
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
        Where the policy says so (:meth:`DevicePolicy.into_slots
        <constrained_decoding.device_policy.DevicePolicy.into_slots>`), the running batch becomes a
        :class:`SlotBatch` and new rows are copied into its free slots instead."""
        old = self.batch if self.batch is not None and self.batch.rows else None
        feats, where, mixed = self._open_new(_host(prompt_idx), prefixes, forks)
        if copies is not None:
            where = [where[c] for c in _host(copies)]
        if copies is not None or mixed:  # the new batch's rows in the callers' order (copies repeated)
            rows = upload(where, self.device)
            self.select(rows, host_rows=where)
            feats = feats.index_select(0, rows)
        if old is not None:
            self.batch = join_rows(old, self.batch, self.policy)  # type: ignore[arg-type]
        return feats

    def _open_new(self, prompts: list[int], prefixes: Sequence[Sequence[int]],
                  forks: Sequence[tuple[RowFork, int] | None] | None) -> tuple[torch.Tensor, list[int], bool]:
        """:meth:`add_rows`' new batch: the rows prefilled whole, then those started from forks
        (:meth:`_fork_plan`); their features, where each given row is in it, and whether both kinds
        opened (the rows then need reordering)."""
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
                self.batch.prepend(first)  # type: ignore[union-attr,arg-type]
        where = [0] * len(keep)
        for i, r in enumerate(fresh + forked):
            where[r] = i
        return torch.cat(feats) if len(feats) > 1 else feats[0], where, bool(forked and fresh)

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
        self._running().select(rows.to(self.device), same_prompt, host_rows, prompts_of)

    @property
    def gathers_selects(self) -> bool:
        """Whether the running rows take a ``same_prompt`` select on the device without reading it back
        (rows in slots where the policy gathers on the device): beam search then selects its parents
        and its kept rows in two selects rather than one read."""
        return isinstance(self.batch, SlotBatch) and self.batch.gathers_on_device

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
        """An encoder-decoder's forward over the running rows (in slots: over the slots in use)."""
        b = self._running()
        out = self._dec_rows(b, b.inputs(ids))
        b.commit(ids.shape[1])
        return b.outputs(out)

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
        """A causal model's forward over the running rows (in slots: over the slots in use)."""
        b = self._running()
        out = self._causal_rows(b, b.inputs(ids))
        b.commit(ids.shape[1])
        return b.outputs(out)

    def _causal_rows(self, b: RowBatch | SlotBatch, ids: torch.Tensor) -> torch.Tensor:
        kw = dict(input_ids=ids, attention_mask=b.mask, position_ids=b.pos)
        if self.restricted:
            body = self.model.base_model
            return body(**kw, **self._with_cache(body, b.cache)).last_hidden_state[:, -1]
        kw.update(self._with_cache(self.model, b.cache))
        if self._keep_arg:
            kw["logits_to_keep"] = 1
        return self.model(**kw).logits[:, -1]
