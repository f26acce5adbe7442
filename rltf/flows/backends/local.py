"""A transformers model in this process as a flow backend: free generation and constrained decoding.

:class:`LocalModelBackend` holds a model, its tokenizer and whether it is an encoder-decoder;
:class:`rltf.flows.backends.hf.HFBackend` loads one from a model id or directory and
:class:`rltf.flows.backends.planner.PlannerBackend` wraps rltf's trainable planner.

Free generation batches the items (left padding for causal models, right for seq2seq) through
``model.generate`` with greedy search; the choice of every token (argmax, or a draw from the
temperature / top-k / top-p distribution) is made by a logits processor with the backend's own
``torch.Generator`` on the model's device, so sampling is reproducible per backend and the
log-probability of the generated tokens (EOS included) under the distribution they were drawn
from is known exactly.

Items with a grammar go to the constrained decoder (:func:`constrained_decoding.decode.greedy_plans`,
or :func:`~constrained_decoding.decode.sample_plans` when sampling): the answer is the grammar's
action formatted as text, and the completion keeps the decoded rows for re-scoring with gradients
(:func:`rltf.flows.backends.planner.rescore`). The decoder formats its prompts itself
(:func:`constrained_decoding.prompts.format_prompt`: causal models read ``"\\nPlan:"`` after the
rendered messages); top-k / top-p do not apply to constrained decoding. An item whose grammar
leaves no choice (a choice among one option: :func:`constrained_decoding.decode.forced_plan`) is
answered without the model, log π_c = 0 (greedy, or sampling with per-item generators: its
seed is still drawn, so the other items sample what they would). ``encoder_memo`` (set by a
trainer for one step, encoder-decoder models): sampling reads the prompts' encoder states through
it, with gradients, for the trainer's scorer to reuse.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import torch
from torch import nn
from transformers import LogitsProcessor, LogitsProcessorList

from constrained_decoding.decode import DecodedPlan, forced_plan, greedy_plans, sample_plans
from constrained_decoding.encoder_memo import EncoderMemo
from constrained_decoding.prompts import (
    Conversation,
    encode_formatted,
    encode_prompts,
    format_prompt,
    uses_chat_template,
)
from constrained_decoding.protocol import Grammar
from constrained_decoding.row_draws import RowDraws, categorical
from constrained_decoding.rows import GrammarError
from rltf.flows.backends.base import (
    BackendError,
    Choices,
    Completion,
    GrammarArg,
    Message,
    Sampling,
    check_messages,
    per_item,
    render_plain,
)
from rltf.flows.engine.choice import choice_grammar

__all__ = ["ChatTemplate", "LocalModelBackend", "as_conversation"]

ChatTemplate = Literal["auto", True, False]


class _Chooser(LogitsProcessor):
    """Picks every next token itself (argmax or a draw with its generator) and records its
    log-probability; returns scores that make ``generate``'s greedy step take exactly that token."""

    def __init__(self, sampling: Sampling, generator: torch.Generator | None, draws: RowDraws | None = None):
        self.sampling = sampling
        self.generator = generator
        self.draws = draws  # per-row uniform streams (per-item generators) instead of the shared generator
        self.logps: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        s = self.sampling
        z = scores.float()
        if s.do_sample:
            z = z / s.temperature
            if s.top_k and s.top_k < z.shape[-1]:
                kth = torch.topk(z, s.top_k, dim=-1).values[:, -1:]
                z = z.masked_fill(z < kth, float("-inf"))
            if s.top_p < 1.0:
                sorted_z, idx = torch.sort(z, dim=-1, descending=True)
                probs = sorted_z.softmax(-1)
                drop = probs.cumsum(-1) - probs >= s.top_p  # keep the smallest prefix reaching top_p
                z = z.masked_fill(torch.zeros_like(drop).scatter(-1, idx, drop), float("-inf"))
            logp = z.log_softmax(-1)
            if self.draws is None:
                tok = torch.multinomial(logp.exp(), 1, generator=self.generator).squeeze(-1)
            else:
                tok = categorical(logp, self.draws.uniforms(range(len(logp)), device=logp.device)).squeeze(-1)
        else:
            logp = z.log_softmax(-1)
            tok = logp.argmax(-1)
        self.logps.append(logp.gather(-1, tok[:, None]).squeeze(-1))
        out = torch.full_like(scores, float("-inf"))
        return out.scatter_(-1, tok[:, None], 0.0)


def _eos_ids(model: nn.Module, tokenizer) -> set[int]:
    ids: set[int] = set()
    gen = getattr(model, "generation_config", None)
    eos = getattr(gen, "eos_token_id", None) if gen is not None else None
    for e in eos if isinstance(eos, (list, tuple)) else [eos]:
        if e is not None:
            ids.add(int(e))
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    return ids


def as_conversation(messages: Sequence[Message]) -> Conversation | None:
    """``messages`` as a :class:`~constrained_decoding.prompts.Conversation` (same chat rendering)
    when they fit its shape: an optional system message, then user / assistant turns in turn,
    ending with a user message (a node's prompt, and its retries); None otherwise."""
    msgs = list(messages)
    system = msgs.pop(0)["content"] if msgs and msgs[0]["role"] == "system" else ""
    roles = [m["role"] for m in msgs]
    if len(msgs) % 2 == 0 or roles != ["user", "assistant"] * (len(msgs) // 2) + ["user"]:
        return None
    pairs = tuple((msgs[k]["content"], msgs[k + 1]["content"]) for k in range(0, len(msgs) - 1, 2))
    return Conversation(msgs[-1]["content"], instructions=system, examples=pairs)


class LocalModelBackend:
    """A transformers model + tokenizer as a backend (see the module docstring).

    ``chat_template``: ``"auto"`` renders messages with the tokenizer's chat template when it has
    one and as a plain ``role: content`` transcript otherwise; ``True`` requires a template,
    ``False`` never uses one. ``plan_separator``: free generation is conditioned on
    :func:`~constrained_decoding.prompts.format_prompt` of the rendered messages, as constrained
    decoding is (what rltf's planners are trained on). ``seed`` seeds the backend's generator."""

    supports_grammar = True
    per_item_generators = True  # generate(..., generators=[one per item]) (see generate)
    encoder_memo: EncoderMemo | None = None  # set by a trainer for one step: sampling reads prompts through it

    def __init__(self, model: nn.Module, tokenizer, is_encoder_decoder: bool, *, sampling: Sampling | None = None,
                 seed: int = 0, chat_template: ChatTemplate = "auto", plan_separator: bool = False,
                 batch_size: int = 16):
        if chat_template not in ("auto", True, False):
            raise BackendError(f"chat_template={chat_template!r}: expected 'auto', true or false")
        if batch_size < 1:
            raise BackendError(f"batch_size={batch_size}: expected at least 1")
        self.model = model
        self.tokenizer = tokenizer
        self.is_encoder_decoder = bool(is_encoder_decoder)
        self.sampling = sampling or Sampling()
        self.plan_separator = plan_separator
        self.batch_size = batch_size
        has_template = bool(getattr(tokenizer, "chat_template", None))
        if chat_template is True and not has_template:
            raise BackendError(f"chat_template=true but the tokenizer {type(tokenizer).__name__} has no chat template")
        self.use_chat_template = has_template if chat_template == "auto" else bool(chat_template)
        if tokenizer.pad_token_id is None:
            if tokenizer.eos_token_id is None:
                raise BackendError("the tokenizer has neither a pad nor an eos token: cannot batch prompts")
            tokenizer.pad_token = tokenizer.eos_token
        self.generator = torch.Generator(device=self.device)
        self.reseed(seed)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def reseed(self, seed: int) -> None:
        """Restart the backend's random stream (same seed, same samples)."""
        self.generator.manual_seed(int(seed))

    # ------------------------------------------------------------------------ rendering
    def _template(self, messages: Sequence[Message], add_generation_prompt: bool) -> str:
        text = self.tokenizer.apply_chat_template(list(messages), tokenize=False,
                                                  add_generation_prompt=add_generation_prompt)
        return text

    def _strip_bos(self, text: str) -> str:
        """A templated text read with ``add_special_tokens=True`` must not get a second BOS."""
        bos = self.tokenizer.bos_token
        if bos and text.startswith(bos):
            ids = self.tokenizer("x", add_special_tokens=True)["input_ids"]
            if ids and ids[0] == self.tokenizer.bos_token_id:
                return text[len(bos):]
        return text

    def describe(self, messages: Sequence[Message]) -> str | Conversation:
        """What the constrained decoder (and a planner's free generation) is given for ``messages``;
        the decoder then formats it (:func:`~constrained_decoding.prompts.format_prompt`). With the
        chat template: a causal model's messages as a :class:`~constrained_decoding.prompts.Conversation`,
        which the decoder wraps in the template exactly once (a templated string would be wrapped a
        second time, as one user message); messages a Conversation cannot hold, the plain transcript
        as its task; a seq2seq model, the template's rendering (its BOS left to the tokenizer).
        Without it: the plain transcript."""
        if self.use_chat_template:
            if uses_chat_template(self.tokenizer, self.is_encoder_decoder):
                return as_conversation(messages) or Conversation(render_plain(messages, assistant_cue=False))
            return self._strip_bos(self._template(messages, add_generation_prompt=True))
        return render_plain(messages, assistant_cue=False)

    def free_prompt_ids(self, messages: Sequence[Message]) -> list[int]:
        """Token ids free generation is conditioned on (see the class docstring)."""
        if self.plan_separator:
            text = format_prompt(self.describe(messages), self.is_encoder_decoder, self.tokenizer)
            return encode_formatted(self.tokenizer, [text], self.is_encoder_decoder)[0]
        if self.use_chat_template:
            text = self._template(messages, add_generation_prompt=True)
            return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        text = render_plain(messages, assistant_cue=not self.is_encoder_decoder)
        return list(self.tokenizer(text, add_special_tokens=True)["input_ids"])

    # ------------------------------------------------------------------------ generation
    def generate(self, messages_batch: Sequence[Sequence[Message]], grammar: GrammarArg | Sequence[GrammarArg] = None,
                 *, sampling: Sampling | None = None,
                 generators: Sequence[torch.Generator] | None = None) -> list[Completion]:
        """One :class:`Completion` per item: free generation, or constrained decoding for items
        with a grammar (see the module docstring).

        ``generators`` (one ``torch.Generator`` per item, sampling only): item i draws one seed from
        ``generators[i]`` and samples from its own streams of that seed
        (:class:`~constrained_decoding.row_draws.RowDraws`) instead of the backend's generator, so
        what an item samples does not depend on the other items of the call (a flow pass run
        alone or batched with others samples the same answers)."""
        batch = check_messages(messages_batch)
        grammars = [self.resolve_grammar(g) for g in per_item(grammar, len(batch))]
        s = sampling or self.sampling
        seeds: list[int] | None = None
        if generators is not None:
            if len(generators) != len(batch):
                raise BackendError(f"got {len(batch)} message lists but {len(generators)} generators; expected one "
                                   "per item")
            if s.do_sample:  # one seed per item, in item order (greedy draws nothing)
                seeds = [int(torch.randint(2**62, (1,), generator=g, device=g.device).item()) for g in generators]
        out: list[Completion | None] = [None] * len(batch)
        free = [i for i, g in enumerate(grammars) if g is None]
        constrained = [i for i, g in enumerate(grammars) if g is not None]
        for k in range(0, len(free), self.batch_size):
            idx = free[k : k + self.batch_size]
            for i, c in zip(idx, self._free([batch[i] for i in idx], s, _pick(seeds, idx))):
                out[i] = c
        for k in range(0, len(constrained), self.batch_size):
            idx = constrained[k : k + self.batch_size]
            for i, c in zip(idx, self._constrained([batch[i] for i in idx], [grammars[i] for i in idx], s,
                                                   _pick(seeds, idx))):
                out[i] = c
        return out  # type: ignore[return-value]

    def resolve_grammar(self, grammar: GrammarArg) -> Grammar | None:
        """A :class:`Choices` becomes the cached :class:`~rltf.flows.engine.choice.ChoiceGrammar` of this tokenizer."""
        if grammar is None:
            return None
        if isinstance(grammar, Choices):
            try:
                return choice_grammar(self.tokenizer, grammar.options)
            except GrammarError as e:  # deterministic: the engine must not retry it
                raise BackendError(f"cannot constrain to the options {list(grammar.options)}: {e}") from e
        if not isinstance(grammar, Grammar):
            raise BackendError(f"expected a constrained_decoding Grammar or Choices, got {type(grammar).__name__}")
        return grammar

    @torch.inference_mode()
    def _free(self, batch: list[list[Message]], s: Sampling, seeds: list[int] | None = None) -> list[Completion]:
        model, tok = self.model, self.tokenizer
        ids = [self.free_prompt_ids(m) for m in batch]
        width = max(len(x) for x in ids)
        pad = tok.pad_token_id
        input_ids = torch.full((len(ids), width), pad, dtype=torch.long)
        mask = torch.zeros((len(ids), width), dtype=torch.long)
        for r, x in enumerate(ids):
            sl = slice(0, len(x)) if self.is_encoder_decoder else slice(width - len(x), width)
            input_ids[r, sl] = torch.as_tensor(x)
            mask[r, sl] = 1
        limit = self._max_positions()
        if limit is not None:  # a causal model attends over prompt + answer: keep both within its positions
            if width >= limit:
                raise BackendError(f"a prompt of {width} tokens does not fit the model's {limit} positions "
                                   "(shorten the node's messages)")
            s = s.replace(max_new_tokens=min(s.max_new_tokens, limit - width))
        chooser = _Chooser(s, self.generator, RowDraws([(x, 0) for x in seeds]) if seeds is not None else None)
        eos = _eos_ids(model, tok)
        was_training = model.training
        model.eval()
        try:
            seqs = model.generate(input_ids=input_ids.to(self.device), attention_mask=mask.to(self.device),
                                  logits_processor=LogitsProcessorList([chooser]), **self._generation_kwargs(s, eos))
        finally:
            model.train(was_training)
        gen = seqs[:, 1:] if self.is_encoder_decoder else seqs[:, width:]
        steps = torch.stack(chooser.logps, 1) if chooser.logps else torch.zeros(len(ids), 0)
        out = []
        for r in range(len(ids)):
            row = gen[r].tolist()
            n = next((t + 1 for t, x in enumerate(row) if x in eos), len(row))
            text_ids = row[: n - 1] if n and row[n - 1] in eos else row[:n]
            lp = float(steps[r, :n].sum()) if steps.shape[1] >= n else None
            out.append(Completion(text=tok.decode(text_ids, skip_special_tokens=True), prompt_tokens=len(ids[r]),
                                  completion_tokens=n, logprob=lp if lp is None or math.isfinite(lp) else None,
                                  prompt=tok.decode(ids[r]), temperature=s.temperature if s.do_sample else 1.0))
        return out

    def _max_positions(self) -> int | None:
        """How many positions a causal model can attend over (None: unbounded or seq2seq)."""
        if self.is_encoder_decoder:
            return None
        cfg = self.model.config
        for key in ("n_positions", "max_position_embeddings"):
            v = getattr(cfg, key, None)
            if isinstance(v, int) and v > 0:
                return v
        return None

    def _generation_kwargs(self, s: Sampling, eos: set[int]) -> dict[str, Any]:
        """Greedy search with our chooser making the choices; sampling knobs of the model's
        generation config are neutralised (they would otherwise warn or warp the scores)."""
        return dict(do_sample=False, num_beams=1, max_new_tokens=s.max_new_tokens, temperature=None, top_p=None,
                    top_k=None, pad_token_id=self.tokenizer.pad_token_id, eos_token_id=sorted(eos) or None)

    def _constrained(self, batch: list[list[Message]], grammars: list[Grammar], s: Sampling,
                     seeds: list[int] | None = None) -> list[Completion]:
        descs = [self.describe(m) for m in batch]
        prompt_ids = encode_prompts(self.tokenizer, descs, self.is_encoder_decoder)
        # an item whose grammar leaves no choice (one option) needs no model: its action, log π_c = 0.
        # Not when sampling from the backend's one generator (the batch's draws depend on its rows)
        skip = not s.do_sample or seeds is not None
        decoded: list[DecodedPlan | None] = [forced_plan(g) if skip else None for g in grammars]
        todo = [i for i, d in enumerate(decoded) if d is None]
        if todo:
            for i, d in zip(todo, self._decode([descs[i] for i in todo], [grammars[i] for i in todo], s,
                                               _pick(seeds, todo))):
                decoded[i] = d
        temperature = s.temperature if s.do_sample else 1.0
        return [Completion(text=d.text, prompt_tokens=len(p), completion_tokens=sum(len(r) for r in d.rows),
                           logprob=float(d.logprob), decoded=d, prompt=desc, temperature=temperature, value=d.plan)
                for d, p, desc in zip(decoded, prompt_ids, descs)]

    def _decode(self, descs: list, grammars: list[Grammar], s: Sampling, seeds: list[int] | None) -> list[DecodedPlan]:
        """The constrained decoder on ``descs``: a sample each (``seeds``: each from its own streams), or greedy."""
        if s.do_sample:
            return [d[0] for d in sample_plans(self.model, self.tokenizer, descs, grammars, 1, s.temperature,
                                               generator=self.generator, sample_seeds=seeds,
                                               encoder_memo=self.encoder_memo if self.is_encoder_decoder else None)]
        return greedy_plans(self.model, self.tokenizer, descs, grammars)


def _pick(seeds: list[int] | None, idx: Sequence[int]) -> list[int] | None:
    return None if seeds is None else [seeds[i] for i in idx]
