"""The n-gram side of the lite text experts: an interpolated Kneser-Ney trigram model and a
trigger (word association) model, each trained once per process on the EXPERT partition.
Fill Mask and Text Generation are built on them; Question Answering reads the model's casing."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from functools import lru_cache

import numpy as np

from envs.openagi.lite.text.common import BOS, EOS, _is_word, content_words, lm_tokens, split_sentences
from envs.openagi.task_data.texts import MASK, expert_texts


class KneserNeyLM:
    """Interpolated Kneser-Ney n-gram model over :func:`lm_tokens`, one discount per order.

    The highest order uses raw counts, lower orders continuation counts; each order's discount
    is Ney's estimate n1 / (n1 + 2 n2); the lowest order interpolates with a uniform distribution.
    """

    def __init__(self, sentences: Iterable[Sequence[str]], order: int = 3):
        if order < 2:
            raise ValueError(f"order={order}: expected at least 2")
        self.order = order
        raw: Counter[tuple[str, ...]] = Counter()
        surface: dict[str, Counter[str]] = defaultdict(Counter)
        for sent in sentences:
            toks = [BOS] * (order - 1) + [t.lower() for t in sent] + [EOS]
            for i in range(order - 1, len(toks)):
                raw[tuple(toks[i - order + 1 : i + 1])] += 1
            for j, t in enumerate(sent):
                if j > 0 and t not in (",", MASK):
                    surface[t.lower()][t] += 1
        # counts[n][context] -> {word: count}: raw at the top order, continuation counts below.
        counts: list[dict[tuple[str, ...], Counter[str]]] = [defaultdict(Counter) for _ in range(order + 1)]
        for gram, c in raw.items():
            counts[order][gram[:-1]][gram[-1]] += c
        for n in range(order - 1, 0, -1):
            for ctx, nxt in counts[n + 1].items():
                for w in nxt:
                    counts[n][ctx[1:]][w] += 1  # one more distinct left extension of ctx[1:] + w
        self.discount = [0.0] * (order + 1)
        for n in range(1, order + 1):
            hist = Counter(c for nxt in counts[n].values() for c in nxt.values())
            n1, n2 = hist.get(1, 0), hist.get(2, 0)
            self.discount[n] = n1 / (n1 + 2 * n2) if n1 + 2 * n2 > 0 else 0.75
        self.tables = [
            {ctx: (dict(nxt), sum(nxt.values()), len(nxt)) for ctx, nxt in counts[n].items()}
            for n in range(order + 1)
        ]
        self.vocab = tuple(sorted(w for w in counts[1][()] if w != BOS))
        self.uniform = 1.0 / (len(self.vocab) + 1)  # +1: the unknown word
        preceders: dict[str, set[str]] = defaultdict(set)
        for ctx, nxt in counts[2].items():
            for w in nxt:
                preceders[w].add(ctx[-1])
        self.preceders = {w: frozenset(s) for w, s in preceders.items()}
        self.surface = {w: c.most_common(1)[0][0] for w, c in surface.items()}
        unigram = self.tables[1][()][0]
        self.frequent = tuple(w for w, _ in Counter(unigram).most_common() if _is_word(w))[:150]
        self._next_dist: dict[tuple[tuple[str, ...], float], tuple[list[str], np.ndarray]] = {}

    def prob(self, word: str, context: Sequence[str]) -> float:
        """P(word | the last order-1 tokens of ``context``), interpolated from unigram up."""
        p = self.uniform
        ctx = tuple(context)[-(self.order - 1) :]
        for n in range(1, self.order + 1):
            h = ctx[len(ctx) - (n - 1) :] if n > 1 else ()
            if len(h) < n - 1:
                break
            entry = self.tables[n].get(h)
            if entry is None:
                continue
            nxt, total, types = entry
            d = self.discount[n]
            p = max(nxt.get(word, 0) - d, 0.0) / total + d * types / total * p
        return p

    def followers(self, context: Sequence[str]) -> set[str]:
        """Words seen after the last one or two tokens of ``context``."""
        out: set[str] = set()
        ctx = tuple(context)
        for n in range(2, self.order + 1):
            entry = self.tables[n].get(ctx[len(ctx) - (n - 1) :])
            if entry is not None:
                out.update(entry[0])
        return out

    def sample(self, context: Sequence[str], rng: np.random.Generator, temperature: float = 0.7) -> str:
        """One token drawn from P(. | context)^(1/temperature), renormalised over the tokens seen
        after this context (truncated sampling: the tiny corpus backs off to near-uniform noise
        otherwise); a context never seen draws from the most frequent words."""
        ctx = tuple(context)[-(self.order - 1) :]
        key = (ctx, temperature)
        if key not in self._next_dist:
            cands = sorted(w for w in self.followers(ctx) if w != BOS) or list(self.frequent)
            logp = np.array([math.log(self.prob(w, ctx)) for w in cands]) / temperature
            p = np.exp(logp - logp.max())
            if len(self._next_dist) > 50_000:
                self._next_dist.clear()
            self._next_dist[key] = (cands, p / p.sum())
        cands, p = self._next_dist[key]
        return cands[int(rng.choice(len(cands), p=p))]


class TriggerModel:
    """Word associations within a text ("trigger pairs", Lau, Rosenfeld & Roukos 1993): how much
    more likely a word is in a text that contains another, as a smoothed pointwise mutual
    information. Lets Fill Mask prefer words that suit the rest of the text (its topic, its
    sentiment), which an n-gram window cannot see."""

    def __init__(self, docs: Iterable[Iterable[str]], smoothing: float = 2.0):
        self.df: Counter[str] = Counter()
        self.pair: dict[str, Counter[str]] = defaultdict(Counter)
        n = 0
        for doc in docs:
            words = set(doc)
            n += 1
            self.df.update(words)
            for c in words:
                self.pair[c].update(words - {c})
        self.n_docs = max(n, 1)
        self.smoothing = smoothing

    def association(self, word: str, context: Sequence[str]) -> float:
        """Mean over known context words c of log P(word | c in text) / P(word)."""
        p = max(self.df.get(word, 0), 0.5) / self.n_docs
        a = self.smoothing
        total, k = 0.0, 0
        for c in context:
            dfc = self.df.get(c, 0)
            if dfc == 0 or c == word:
                continue
            total += math.log((self.pair[c].get(word, 0) + a * p) / (dfc + a) / p)
            k += 1
        return total / k if k else 0.0


@lru_cache(maxsize=1)
def trigger_model() -> TriggerModel:
    """Word associations of the expert partition (one bag of content words per expert text)."""
    return TriggerModel(content_words(t) for t in expert_texts())


@lru_cache(maxsize=1)
def language_model() -> KneserNeyLM:
    """The trigram model of the expert partition (trained once per process, well under a second)."""
    sentences = [lm_tokens(s, lower=False) for text in expert_texts() for s in split_sentences(text)]
    return KneserNeyLM([s for s in sentences if s])
