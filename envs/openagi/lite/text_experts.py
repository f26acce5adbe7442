"""The offline text experts of the lite zoo: real, fast methods under the OpenAGI tool names.

- Sentiment Analysis: VADER (lexicon and rules); compound >= :data:`SENTIMENT_THRESHOLD` ->
  "positive", else "negative" (VADER's own cut-off for "positive"; neutral counts as negative).
- Text Summarization: extractive; returns the most central sentence (TF-IDF degree centrality,
  i.e. continuous LexRank without the power iteration).
- Fill Mask: an interpolated Kneser-Ney trigram model trained on the EXPERT partition; each
  candidate content word is scored with its left context, the two words to its right, and its
  association with the other words of the text (trigger pairs learned on the same partition).
  Trained on first use (about 0.2 s), kept in memory.
- Question Answering: extractive; scores spans of every sentence by IDF-weighted overlap of the
  sentence with the query, the expected answer type (number, date, name) and the distance to the
  query's words in the sentence.
- Text Generation: a distractor: samples 8-15 words from the same trigram model mixed with a
  unigram cache of the input's content words (so it stays on topic), seeded from a hash of the
  input, and returns the continuation only (a text-generation pipeline with
  ``return_full_text=False``). Returning the input too was tried: an extractive QA expert then
  simply ignores the appended sentence, so misusing the tool cost nothing; this way, any plan
  that feeds its output to another expert is worse.

None of them reads ground truth. ``python -m envs.openagi.lite.text_experts`` prints quality and
timing figures on the task partition, and how plan choice changes them.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from functools import lru_cache

import numpy as np

from envs.openagi.lite.text_data import FUNCTION_WORDS, MASK, expert_texts
from envs.openagi.registry import ToolRegistry
from envs.openagi.tools import register_spec

SENTIMENT_THRESHOLD = 0.05
BOS, EOS = "<s>", "</s>"

_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+|(?<=[.!?][\"')\]])\s+")
_TOKEN_RE = re.compile(r"\[MASK\]|[A-Za-z0-9]+(?:['\-.,:][A-Za-z0-9]+)*|[,;:]")
_SENT_END = re.compile(r"[.!?][\"')\]]?\s+")
_SENT_END_RIGHT = re.compile(r"[.!?][\"')\]]?(?:\s|$)")
_WORDLIKE = re.compile(r"^[a-z0-9]+(?:['\-.,:][a-z0-9]+)*$")


def _check_texts(name: str, batch: Sequence[object]) -> list[str]:
    bad = [x for x in batch if not isinstance(x, str)]
    if bad:
        raise TypeError(f"{name} expects text (str) inputs, got {type(bad[0]).__name__}")
    return list(batch)  # type: ignore[arg-type]


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text`` (split after . ! ? followed by whitespace), stripped, non-empty."""
    return [s.strip() for s in _SENT_SPLIT.split(text.strip()) if s.strip()]


def lm_tokens(sentence: str, lower: bool = True) -> list[str]:
    """LM tokens of one sentence: words, numbers, commas (";" and ":" become ","), and
    ``[MASK]`` kept as is; lowercased unless ``lower=False``."""
    out = []
    for tok in _TOKEN_RE.findall(sentence):
        if tok == MASK:
            out.append(MASK)
        elif tok in ",;:":
            out.append(",")
        else:
            out.append(tok.lower() if lower else tok)
    return out


# --------------------------------------------------------------------------- n-gram language model


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


def _is_word(tok: str) -> bool:
    return bool(_WORDLIKE.match(tok)) and tok not in (BOS, EOS)


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


def content_words(text: str) -> list[str]:
    """Lowercase content words of a text (no function words, three letters or more)."""
    return [t for s in split_sentences(text) for t in lm_tokens(s)
            if _is_word(t) and t not in FUNCTION_WORDS and len(t) > 2 and not t[0].isdigit()]  # fmt: skip


@lru_cache(maxsize=1)
def trigger_model() -> TriggerModel:
    """Word associations of the expert partition (one bag of content words per expert text)."""
    return TriggerModel(content_words(t) for t in expert_texts())


@lru_cache(maxsize=1)
def language_model() -> KneserNeyLM:
    """The trigram model of the expert partition (trained once per process, well under a second)."""
    sentences = [lm_tokens(s, lower=False) for text in expert_texts() for s in split_sentences(text)]
    return KneserNeyLM([s for s in sentences if s])


# --------------------------------------------------------------------------------------- Fill Mask

FILL_CONTENT_WORDS_ONLY = True
"""Fill masks only with content words: :func:`~envs.openagi.lite.text_data.cloze` masks a content
word whenever a text has one, so a function word is almost never the answer (on held-out expert
text this raises top-1 from 0.127 to 0.152)."""


TRIGGER_WEIGHT = 0.5
"""Weight of the trigger association (per unit of PMI) added to the n-gram log-probability."""


RERANK_TOP = 30
"""Only the n-gram model's best candidates are rescored with the trigger association (speed)."""


def _best_word(lm: KneserNeyLM, left: list[str], right: list[str], extra: Iterable[str],
               triggers: TriggerModel | None = None, context: Sequence[str] = ()) -> str:  # fmt: skip
    """argmax_w log P(w | left) + sum_k log P(right_k | left, w, right_<k)
    + TRIGGER_WEIGHT * association(w, context), the last term for the top candidates only;
    ties go to the alphabetically smaller word."""
    cands = lm.followers(left) | set(lm.frequent) | set(extra)
    if right:
        cands |= lm.preceders.get(right[0], frozenset())
    scored = []
    for w in cands:
        if not _is_word(w) or (FILL_CONTENT_WORDS_ONLY and (w in FUNCTION_WORDS or len(w) < 3)):
            continue
        score = math.log(lm.prob(w, left))
        ctx = [*left, w]
        for r in right:
            score += math.log(lm.prob(r, ctx))
            ctx.append(r)
        scored.append((-score, w))
    if not scored:
        return lm.frequent[0]
    top = sorted(scored)[:RERANK_TOP]
    if triggers is not None and TRIGGER_WEIGHT:
        top = sorted((s - TRIGGER_WEIGHT * triggers.association(w, context), w) for s, w in top)
    return top[0][1]


def _fill_one(lm: KneserNeyLM, text: str, triggers: TriggerModel | None = None) -> str:
    """Replace each ``[MASK]`` of ``text``, left to right, with the model's top-1 word.

    Candidates are the words seen after the left context or before the right word, the most
    frequent words and the words of the text itself; the filled word takes the casing it has in
    the text or in training, and a capital at the start of a sentence.
    """
    if MASK not in text:
        return text
    surface_in_text: dict[str, str] = {}
    for s in split_sentences(text):
        for j, tok in enumerate(_TOKEN_RE.findall(s)):
            if j > 0 and tok != MASK:
                surface_in_text.setdefault(tok.lower(), tok)
    context = sorted(set(content_words(text.replace(MASK, " "))))
    pieces = re.split(r"(\[MASK\])", text)
    out = []
    for k, piece in enumerate(pieces):
        if piece != MASK:
            out.append(piece)
            continue
        before, after = "".join(out), "".join(pieces[k + 1 :])
        ends = list(_SENT_END.finditer(before))
        left_sent = before[ends[-1].end() :] if ends else before
        end = _SENT_END_RIGHT.search(after)
        right_sent = after[: end.start()] if end else after
        left = [BOS] * (lm.order - 1) + lm_tokens(left_sent)
        right = lm_tokens(right_sent)
        cut = right.index(MASK) if MASK in right else None  # the context stops at the next mask
        right = right[:cut][: lm.order - 1]
        if cut is None and len(right) < lm.order - 1:
            right.append(EOS)
        word = _best_word(lm, left, right, surface_in_text, triggers, context)
        word = surface_in_text.get(word) or lm.surface.get(word, word)
        if not left_sent.strip():
            word = word[:1].upper() + word[1:]
        out.append(word)
    return "".join(out)


def fill_mask(texts: Sequence[str]) -> list[str]:
    """Batched Fill Mask: each ``[MASK]`` replaced by the trigram model's top-1 word."""
    texts = _check_texts("Fill Mask", texts)
    lm, triggers = language_model(), trigger_model()
    return [_fill_one(lm, t, triggers) for t in texts]


# --------------------------------------------------------------------------------- Text Generation

GEN_WORDS = (8, 15)
"""Inclusive range of words the Text Generation distractor appends."""
GEN_CACHE_WEIGHT = 0.3
"""Probability of drawing the next word from the input's own content words (a unigram cache,
Kuhn & De Mori 1990): keeps the continuation on the input's topic, as a real generator would."""


def _text_seed(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")


def _continue_one(lm: KneserNeyLM, text: str) -> str:
    rng = np.random.default_rng(_text_seed(text))
    n_words = int(rng.integers(GEN_WORDS[0], GEN_WORDS[1] + 1))
    stripped = text.rstrip()
    open_sentence = bool(stripped) and not re.search(r"[.!?][\"')\]]?$", stripped)
    ctx = [BOS] * (lm.order - 1)
    if open_sentence:
        ctx += lm_tokens(split_sentences(stripped)[-1])
    cache = [t for s in split_sentences(stripped) for t in lm_tokens(s)
             if _is_word(t) and t not in FUNCTION_WORDS and len(t) > 2]  # fmt: skip
    surface = {t.lower(): t for s in split_sentences(stripped) for t in lm_tokens(s, lower=False)[1:]}
    words: list[str] = []
    pieces: list[str] = []
    start_of_sentence = not open_sentence
    while len(words) < n_words:
        w = lm.sample(ctx, rng)
        if cache and rng.random() < GEN_CACHE_WEIGHT:
            pick = cache[int(rng.integers(len(cache)))]
            w = w if pick == ctx[-1] else pick  # no immediate repeats ("food food")
        if w == EOS or (w == "," and (start_of_sentence or (pieces and pieces[-1].endswith(",")))):
            if pieces and not start_of_sentence:
                pieces[-1] = pieces[-1].rstrip(",") + "."
                start_of_sentence = True
                if len(words) >= GEN_WORDS[0]:
                    break
            ctx = [BOS] * (lm.order - 1)
            continue
        if w == "," and not pieces:
            pass  # the input's open sentence took the comma; nothing to attach it to
        elif w == ",":
            pieces[-1] += ","
        else:
            surf = surface.get(w) or lm.surface.get(w, w)
            pieces.append(surf[:1].upper() + surf[1:] if start_of_sentence else surf)
            words.append(w)
            start_of_sentence = False
        ctx.append(w)
    cont = " ".join(pieces).rstrip(",")
    return cont if cont.endswith(".") else cont + "."


def generate_text(texts: Sequence[str]) -> list[str]:
    """Batched Text Generation: 8-15 words continuing each input (deterministic per input)."""
    texts = _check_texts("Text Generation", texts)
    lm = language_model()
    return [_continue_one(lm, t) for t in texts]


# ------------------------------------------------------------------------------ Sentiment Analysis


@lru_cache(maxsize=1)
def _vader():
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    return SentimentIntensityAnalyzer()


def sentiment(texts: Sequence[str]) -> list[str]:
    """Batched Sentiment Analysis: VADER compound score thresholded into positive / negative."""
    texts = _check_texts("Sentiment Analysis", texts)
    analyzer = _vader()
    return [
        "positive" if analyzer.polarity_scores(t)["compound"] >= SENTIMENT_THRESHOLD else "negative"
        for t in texts
    ]


# ----------------------------------------------------------------------------- Text Summarization


def _summarize_one(text: str) -> str:
    from sklearn.feature_extraction.text import TfidfVectorizer

    sents = split_sentences(text)
    if len(sents) <= 1:
        return text.strip()
    vec = TfidfVectorizer(
        stop_words=sorted(FUNCTION_WORDS), token_pattern=r"(?u)\b[A-Za-z][A-Za-z]+\b", sublinear_tf=True
    )
    try:
        x = vec.fit_transform([s.replace(MASK, " ") for s in sents])
    except ValueError:  # nothing but stop words: no centrality to compute
        return sents[0]
    sim = (x @ x.T).toarray()
    np.fill_diagonal(sim, 0.0)
    return sents[int(np.argmax(sim.sum(axis=1)))]


def summarize(texts: Sequence[str]) -> list[str]:
    """Batched Text Summarization: the sentence most similar to the rest of the text."""
    texts = _check_texts("Text Summarization", texts)
    return [_summarize_one(t) for t in texts]


# ------------------------------------------------------------------------------ Question Answering

_QA_STOP = FUNCTION_WORDS - frozenset(
    "one two three four five six eight nine ten eleven twelve fifteen twenty forty fifty sixty hundred "
    "first third".split()
)
_NUMBER_WORDS = frozenset(
    "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand "
    "million billion dozen half quarter quarters third thirds fifth fifths tenth tenths hundreds thousands "
    "millions dozens once twice".split()
)
_TIME_WORDS = frozenset(
    "january february march april may june july august september october november december monday "
    "tuesday wednesday thursday friday saturday sunday mondays tuesdays wednesdays thursdays fridays "
    "saturdays sundays spring summer autumn winter century morning evening night noon midnight".split()
)
_QUANT_MODIFIERS = ("more than", "less than", "fewer than", "up to", "about", "around", "nearly",
                    "almost", "roughly", "over", "only", "once every", "every")  # fmt: skip
_LOCATIVE = frozenset("in at on by under near from to into beside along inside above below across off".split())
_AUXILIARIES = frozenset("did does do has have had can could will would should".split())
_JOINERS = frozenset({"of", "and", "de", "da", "or", ","})
_TOKEN_SPAN_RE = re.compile(r"\[MASK\]|[A-Za-z0-9]+(?:['\-.,:][A-Za-z0-9]+)*|[^\sA-Za-z0-9]")
_IRREGULAR = {
    "began": "begin", "begun": "begin", "built": "build", "brought": "bring", "bought": "buy",
    "came": "come", "caught": "catch", "did": "do", "done": "do", "drove": "drive", "fell": "fall",
    "felt": "feel", "flew": "fly", "found": "find", "gave": "give", "given": "give", "got": "get",
    "grew": "grow", "grown": "grow", "had": "have", "held": "hold", "hid": "hide", "kept": "keep",
    "knew": "know", "known": "know", "laid": "lay", "led": "lead", "left": "leave", "lost": "lose",
    "made": "make", "meant": "mean", "met": "meet", "paid": "pay", "ran": "run", "rose": "rise",
    "risen": "rise", "said": "say", "sang": "sing", "sat": "sit", "saw": "see", "seen": "see",
    "sent": "send", "shook": "shake", "slept": "sleep", "sold": "sell", "spent": "spend",
    "spoke": "speak", "stood": "stand", "struck": "strike", "swam": "swim", "taught": "teach",
    "told": "tell", "took": "take", "taken": "take", "thought": "think", "threw": "throw",
    "used": "use", "went": "go", "won": "win", "wore": "wear", "wrote": "write", "written": "write",
}
"""Irregular past forms, so "who built X" matches "X was built"."""
_MEASURES = frozenset(
    "metres meters kilometres kilometers miles feet foot centimetres inches seconds minutes hours days "
    "weeks months years decades centuries times degrees tonnes kilograms kilos percent dollars pounds "
    "euros".split()
)
_WH_RE = re.compile(r"\b(who|whom|whose|when|where|why|how|what|which)\b")


def _stem(word: str) -> str:
    """A light suffix stripper, enough to match "lives"/"live", "received"/"receive"."""
    w = word.lower()
    if w.endswith("'s"):
        w = w[:-2]
    if w in _IRREGULAR:
        w = _IRREGULAR[w]
    for suf, rep in (("ies", "y"), ("ied", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if w.endswith(suf) and len(w) - len(suf) >= 3 and not w.endswith("ss"):
            w = w[: len(w) - len(suf)] + rep
            break
    return w[:-1] if w.endswith("e") and len(w) > 3 else w


def _type_noun(question: str) -> str | None:
    """The noun of "which X" / "what X" ("which king agreed" -> "king"), which answers may contain."""
    m = re.search(r"\b(?:which|what)\s+((?:[a-z]+\s+)?[a-z]+)", question.lower())
    if not m:
        return None
    for w in m.group(1).split():
        if w in _NUMBER_WORDS:
            continue
        return None if w in _AUXILIARIES | {"is", "are", "was", "were"} | _QA_STOP else _stem(w)
    return None


def _answer_type(question: str) -> str:
    """What kind of span answers ``question``: quantity, date, person, place or thing.

    Decided by the first question word ("Where do bees perform ... where to fly" is a where)."""
    q = question.lower()
    wh = _WH_RE.search(q)
    rest = q[wh.start() :] if wh else q
    if re.match(r"(how (many|much|long|far|deep|high|tall|fast|old|big|often|thick))\b|"
                r"(what|which) (share|percentage|proportion|fraction)\b", rest) or "by how much" in q:  # fmt: skip
        return "quantity"
    if re.match(r"when\b|(what|which) (year|date|day|days|month|century|time)\b", rest) or "on what date" in q:
        return "date"
    person = (r"(who|whom|whose)\b|(which|what) (explorer|writer|king|queen|emperor|pharaoh|scientist|"
              r"person|artist|author|teacher|man|woman|people)\b")  # fmt: skip
    if re.match(person, rest) or re.search(r"\bwith whom\b", q):
        return "person"
    place = (r"where\b|(which|what) (city|country|town|state|island|sea|ocean|river|lake|region|"
             r"continent|galaxy|kingdom|place|mountain|port)\b")  # fmt: skip
    if re.match(place, rest) or re.search(r"\b(capital|peak)\b", q):
        return "place"
    return "thing"


def _question_direction(question: str) -> int:
    """+1 when the answer usually follows the question's words in the text ("what did X build"),
    -1 when it precedes them ("who built X"), 0 when either may hold ("what is X")."""
    words = re.findall(r"[a-z']+", question.lower())
    for i, w in enumerate(words):
        if w in ("who", "what", "which", "where", "when", "how", "whom"):
            window = words[i + 1 : i + 5]
            for x in window:
                if x in _AUXILIARIES:
                    return 1
                if x in ("is", "are", "was", "were"):
                    return 0
            return -1 if w in ("who", "what", "which") else 0
    return 0


def _is_number(tok: str, following: str = "") -> bool:
    t = tok.lower()
    if t == "one" and following.lower() == "of":  # "one of the longest rivers" is not a count
        return False
    return bool(re.match(r"^\d", t)) or t in _NUMBER_WORDS or bool(
        re.match(r"^(twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)-\w+$", t)
    )


def _is_date(tok: str) -> bool:
    t = tok.lower()
    return bool(re.match(r"^1\d{3}s?$|^20\d\ds?$", t)) or t in _TIME_WORDS or t in ("bc", "ad")


class _Doc:
    """A document split into sentences of (token, start, end) with the document's proper nouns."""

    def __init__(self, document: str):
        self.sentences: list[list[tuple[str, int, int]]] = []
        pos = 0
        for s in split_sentences(document):
            start = document.find(s, pos)
            self.sentences.append([(m.group(), m.start() + start, m.end() + start) for m in _TOKEN_SPAN_RE.finditer(s)])
            pos = start + len(s)
        self.capitalised = {t.lower() for sent in self.sentences for t, _, _ in sent[1:] if t[:1].isupper()}

    def is_cap(self, tok: str, position: int) -> bool:
        """A capitalised word that is a name, not just the first word of a sentence."""
        if not tok[:1].isupper() or tok == MASK:
            return False
        if position > 0:
            return True
        low = tok.lower()
        return low in self.capitalised or (low not in _QA_STOP and low not in language_model().surface)


def _candidates(doc: _Doc, toks: list[str], qstems: set[str], type_noun: str | None) -> set[tuple[int, int]]:
    """Token ranges [i, j) that could be answers: content chunks (with and without inner
    joiners), capitalised runs, and number phrases with their modifiers and unit."""
    n = len(toks)

    def content(i: int) -> bool:
        t = toks[i]
        return (t[:1].isalnum() or t == MASK) and t.lower() not in _QA_STOP and (
            _stem(t) not in qstems or (_stem(t) == type_noun and doc.is_cap(t, i)))

    spans: set[tuple[int, int]] = set()
    for allow_join in (False, True):
        i = 0
        while i < n:
            if not content(i):
                i += 1
                continue
            j = i + 1
            while j < n:
                if content(j):
                    j += 1
                elif allow_join and toks[j].lower() in _JOINERS and j + 1 < n and content(j + 1):
                    j += 2
                else:
                    break
            spans.add((i, j))
            i = j
    for i in range(n):  # capitalised runs inside chunks ("Neil Armstrong" out of a longer chunk)
        if doc.is_cap(toks[i], i) and (i == 0 or not doc.is_cap(toks[i - 1], i - 1)):
            j = i + 1
            while j < n and (doc.is_cap(toks[j], j) or (toks[j] in ("of", "de", "da") and j + 1 < n
                                                         and doc.is_cap(toks[j + 1], j + 1))):  # fmt: skip
                j += 1
            spans.add((i, j))
    low = [t.lower() for t in toks]
    for i in range(n):  # number phrases: [modifier] number+ [unit]
        nxt = toks[i + 1] if i + 1 < n else ""
        if not _is_number(toks[i], nxt) or (i > 0 and _is_number(toks[i - 1], toks[i])):
            continue
        j = i + 1
        while j < n and (_is_number(toks[j]) or _is_date(toks[j]) or (
            low[j] in ("and", "to", "or", "in") and j + 1 < n and _is_number(toks[j + 1]))):
            j += 1
        start = i
        for mod in _QUANT_MODIFIERS:
            k = len(mod.split())
            if i - k >= 0 and " ".join(low[i - k : i]) == mod:
                start = i - k
                break
        spans.add((start, j))
        if j < n and content(j):
            spans.add((start, j + 1))
    return spans


def _span_score(doc: _Doc, toks: list[str], i: int, j: int, atype: str, direction: int,
                matched: list[int], qstems: set[str], type_noun: str | None) -> float:  # fmt: skip
    words = toks[i:j]
    content_words = [t for t in words if t.lower() not in _JOINERS and t.lower() not in _QA_STOP]
    if all(_stem(t) in qstems for t in content_words):
        return -math.inf  # the question's own words are no answer
    has_num = any(_is_number(t, toks[i + k + 1] if i + k + 1 < len(toks) else "") for k, t in enumerate(words))
    has_date = any(_is_date(t) for t in words)
    caps = [doc.is_cap(t, i + k) for k, t in enumerate(words) if t.lower() not in _JOINERS]
    all_cap = bool(caps) and all(caps)
    unit = has_num and not _is_number(words[-1]) and not _is_date(words[-1])
    after = toks[j] if j < len(toks) else ""
    score = 0.0
    if atype == "quantity":
        score += (3.0 if has_num and not has_date else -2.0) + (0.4 if unit else 0.0)
        if has_num and after and _stem(after) in qstems:
            score += 1.0  # "How many provinces" -> "ten provinces": the count of the asked thing
        if unit and words[-1].lower() in _MEASURES:
            score += 1.0
    elif atype == "date":
        score += 3.0 if has_date else (0.5 if has_num else -2.0)
    elif atype == "person":
        score += (2.0 if all_cap else 0.5 if any(caps) else -0.5) - (1.0 if has_num or has_date else 0.0)
        if i > 0 and toks[i - 1].lower() in ("in", "at", "from", "to", "near", "of"):
            score -= 0.8  # "in Athens": a place, not a person
    elif atype == "place":
        score += (1.2 if all_cap else 0.3 if any(caps) else 0.0) - (1.0 if has_num or has_date else 0.0)
        if i > 0 and toks[i - 1].lower() in _LOCATIVE or i > 1 and toks[i - 2].lower() in _LOCATIVE:
            score += 0.8
    else:
        score += 0.2 if all_cap else 0.0
        if any(t.lower() in ("and", "or") for t in words):
            score += 0.2  # a coordinated noun phrase is answered whole: "silk, spices and paper"
    score -= 1.5 * sum(_stem(t) in qstems and _stem(t) != type_noun for t in words)
    score -= 0.04 * max(0, len(content_words) - 1)
    if not content_words or words[-1].lower() in _JOINERS:
        score -= 2.0
    if matched:
        dist = min(min(abs(m - i), abs(m - (j - 1))) for m in matched)
        score -= 0.5 * math.log1p(dist)
        if direction > 0:
            score += 0.4 if i > min(matched) else -0.4
        elif direction < 0:
            passive_agent = "by" in (t.lower() for t in toks[max(0, i - 4) : i])  # "was revived ... by X"
            score += 0.4 if j <= max(matched) or passive_agent else -0.4
        if any(m in (i - 1, j) and doc.is_cap(toks[m], m) for m in matched):
            score -= 1.0  # touching a name the question already gives: part of that same name
    else:
        score -= 1.0
    return score


def _answer_one(document: str, question: str) -> str:
    qtoks = [t for t in _TOKEN_SPAN_RE.findall(question) if t[:1].isalnum() and t.lower() not in _QA_STOP]
    qstems = {_stem(t) for t in qtoks}
    atype, direction, type_noun = _answer_type(question), _question_direction(question), _type_noun(question)
    doc = _Doc(document)
    if not doc.sentences:
        return ""
    sent_stems = [{_stem(t) for t, _, _ in s} for s in doc.sentences]
    n_sent = len(doc.sentences)
    idf = {w: math.log((1 + n_sent) / (1 + sum(w in ss for ss in sent_stems))) + 1.0 for w in qstems}
    q_mass = sum(idf.values()) or 1.0
    best, best_score = None, -math.inf
    for k, sent in enumerate(doc.sentences):
        toks = [t for t, _, _ in sent]
        overlap = sum(idf[w] for w in qstems if w in sent_stems[k]) / q_mass
        matched = [i for i, t in enumerate(toks) if _stem(t) in qstems]
        for i, j in sorted(_candidates(doc, toks, qstems, type_noun)):
            score = 4.0 * overlap + _span_score(doc, toks, i, j, atype, direction, matched, qstems, type_noun)
            if score > best_score:
                best, best_score = (k, i, j), score
    if best is None:  # no content word anywhere: the first sentence is the best guess
        sent = doc.sentences[0]
        return document[sent[0][1] : sent[-1][2]]
    k, i, j = best
    sent = doc.sentences[k]
    return document[sent[i][1] : sent[j - 1][2]]


def answer_questions(documents: Sequence[str], questions: Sequence[str]) -> list[str]:
    """Batched Question Answering: an extractive span of each document answering its question."""
    documents = _check_texts("Question Answering (document)", documents)
    questions = _check_texts("Question Answering (query)", questions)
    return [_answer_one(d, q) for d, q in zip(documents, questions)]


# ------------------------------------------------------------------------------------ registration


def register_text_experts(registry: ToolRegistry) -> None:
    """Register the five offline text experts under their OpenAGI names and modalities."""
    register_spec(registry, "Sentiment Analysis", sentiment)
    register_spec(registry, "Text Summarization", summarize)
    register_spec(registry, "Fill Mask", fill_mask)
    register_spec(registry, "Question Answering", answer_questions)
    register_spec(registry, "Text Generation", generate_text)


# ------------------------------------------------------------------------------------------ report


def _masked_word(original: str, clozed: str) -> str:
    """The word :func:`~envs.openagi.lite.text_data.cloze` replaced in ``original``."""
    i = clozed.index(MASK)
    return original[i : i + len(original) - len(clozed) + len(MASK)]


def fill_mask_top1(texts: Sequence[str], seed: int = 0) -> float:
    """Top-1 accuracy of Fill Mask on one cloze per text (case-insensitive word match)."""
    from envs.openagi.lite.text_data import cloze

    rng = np.random.default_rng(seed)
    clozed = [cloze(t, rng) for t in texts]
    filled = fill_mask(clozed)
    hits = 0
    for t, c, f in zip(texts, clozed, filled):
        i = c.index(MASK)
        gold = _masked_word(t, c)
        guess = f[i : i + len(f) - len(c) + len(MASK)]
        hits += gold.lower() == guess.lower()
    return hits / len(texts)


def report(n: int = 240, seed: int = 0, cloze_seeds: int = 5) -> None:
    """Print quality and timing figures on the TASK partition, and how plan choice changes them.

    Figures on clozed inputs are means over ``cloze_seeds`` independent clozes of every sample."""
    import time

    from envs.openagi.lite import text_data as td
    from envs.openagi.metrics.text import semantic_similarity, summary_similarity, token_f1

    reviews = td.review_samples(n, seed)
    summaries = td.summary_samples(len(td.passages("task")), seed)
    qa = td.qa_samples(sum(len(p.questions) for p in td.passages("task")), seed)
    texts, labels = [x for x, _ in reviews], [y for _, y in reviews]
    docs, refs = [d for d, _ in summaries], [y for _, y in summaries]
    qdocs, qqs, answers = (list(col) for col in zip(*qa))

    def clozes(xs: list[str]) -> list[list[str]]:
        return [[td.cloze(x, np.random.default_rng([seed, k, i])) for i, x in enumerate(xs)]
                for k in range(cloze_seeds)]

    language_model(), trigger_model(), _vader()
    print("== timing per sample (2 cores; first call excluded)")
    for name, fn, args in (
        ("Sentiment Analysis", sentiment, (texts,)),
        ("Text Summarization", summarize, (docs,)),
        ("Fill Mask (passages)", fill_mask, (clozes(docs)[0],)),
        ("Fill Mask (reviews)", fill_mask, (clozes(texts)[0],)),
        ("Question Answering", answer_questions, (qdocs, qqs)),
        ("Text Generation", generate_text, (docs,)),
    ):
        fn(*(a[:2] for a in args))
        t0 = time.perf_counter()
        fn(*args)
        print(f"  {name:24s} {1000 * (time.perf_counter() - t0) / len(args[0]):6.2f} ms")

    print(f"== Fill Mask top-1 (task texts, {cloze_seeds} clozes each)")
    qs = [q.question for p in td.passages("task") for q in p.questions]
    for name, pool in (("reviews", [r.text for r in td.reviews("task")]),
                       ("passages", [p.text for p in td.passages("task")]), ("questions", qs)):  # fmt: skip
        print(f"  {name:10s} {np.mean([fill_mask_top1(pool, seed + k) for k in range(cloze_seeds)]):.3f}")

    def mean_over(clozed_sets: list[list[str]], score) -> float:
        return float(np.mean([score(c) for c in clozed_sets]))

    def acc(preds: list[str]) -> float:
        return float(np.mean([p == y for p, y in zip(preds, labels)]))

    ctexts = clozes(texts)
    print(f"== Sentiment accuracy ({len(texts)} task reviews)")
    rows = {
        "plain: SA": acc(sentiment(texts)),
        "plain: TG -> SA": acc(sentiment(generate_text(texts))),
        "plain: TS -> SA": acc(sentiment(summarize(texts))),
        "plain: FM -> SA (no-op)": acc(sentiment(fill_mask(texts))),
        "clozed: SA": mean_over(ctexts, lambda c: acc(sentiment(c))),
        "clozed: FM -> SA": mean_over(ctexts, lambda c: acc(sentiment(fill_mask(c)))),
        "clozed: TG -> SA": mean_over(ctexts, lambda c: acc(sentiment(generate_text(c)))),
        "clozed: TS -> SA": mean_over(ctexts, lambda c: acc(sentiment(summarize(c)))),
        "clozed: FM -> TG -> SA": mean_over(ctexts, lambda c: acc(sentiment(generate_text(fill_mask(c))))),
        "clozed: FM -> TS -> SA": mean_over(ctexts, lambda c: acc(sentiment(summarize(fill_mask(c))))),
    }
    for k, v in rows.items():
        print(f"  {k:26s} {v:.3f}")

    cdocs = clozes(docs)
    print(f"== Summarization ({len(docs)} task passages): semantic_similarity | summary_similarity")

    def sims(preds: list[str]) -> np.ndarray:
        return np.array([np.mean(semantic_similarity(preds, refs)), np.mean(summary_similarity(preds, refs))])

    rows = {
        "plain: TS": sims(summarize(docs)),
        "plain: TG -> TS": sims(summarize(generate_text(docs))),
        "plain: FM (no-op, no TS)": sims(fill_mask(docs)),
        "plain: TS -> TG": sims(generate_text(summarize(docs))),
        "clozed: TS": np.mean([sims(summarize(c)) for c in cdocs], axis=0),
        "clozed: FM -> TS": np.mean([sims(summarize(fill_mask(c))) for c in cdocs], axis=0),
        "clozed: TG -> TS": np.mean([sims(summarize(generate_text(c))) for c in cdocs], axis=0),
        "clozed: FM -> TG -> TS": np.mean([sims(summarize(generate_text(fill_mask(c)))) for c in cdocs], axis=0),
        "clozed: FM (no TS)": np.mean([sims(fill_mask(c)) for c in cdocs], axis=0),
    }
    for k, (a, b) in rows.items():
        print(f"  {k:26s} {a:.3f} | {b:.3f}")

    def f1(dd: list[str], qq: list[str]) -> float:
        return float(np.mean([token_f1(p, a) for p, a in zip(answer_questions(dd, qq), answers)]))

    cd, cq = clozes(qdocs), clozes(qqs)
    fd, fq = [fill_mask(c) for c in cd], [fill_mask(c) for c in cq]
    print(f"== QA token F1 ({len(qa)} task questions)")
    print(f"  {'':12s} {'query plain':>12s} {'clozed':>8s} {'clozed+FM':>10s}")
    print(f"  {'doc plain':12s} {f1(qdocs, qqs):12.3f} {np.mean([f1(qdocs, c) for c in cq]):8.3f}"
          f" {np.mean([f1(qdocs, c) for c in fq]):10.3f}")  # fmt: skip
    print(f"  {'clozed':12s} {np.mean([f1(c, qqs) for c in cd]):12.3f}"
          f" {np.mean([f1(a, b) for a, b in zip(cd, cq)]):8.3f} {np.mean([f1(a, b) for a, b in zip(cd, fq)]):10.3f}")
    print(f"  {'clozed+FM':12s} {np.mean([f1(c, qqs) for c in fd]):12.3f}"
          f" {np.mean([f1(a, b) for a, b in zip(fd, cq)]):8.3f} {np.mean([f1(a, b) for a, b in zip(fd, fq)]):10.3f}")
    print(f"  doc TG, query plain {f1(generate_text(qdocs), qqs):.3f};  doc plain, query TG "
          f"{f1(qdocs, generate_text(qqs)):.3f};  doc TS, query plain {f1(summarize(qdocs), qqs):.3f}")
    dev = [(p.text, q.question, q.answer) for p in td.passages("expert") for q in p.questions]
    preds = answer_questions([d for d, _, _ in dev], [q for _, q, _ in dev])
    print(f"  (expert-partition questions, plain: {np.mean([token_f1(p, a) for p, (_, _, a) in zip(preds, dev)]):.3f})")


if __name__ == "__main__":
    report()
