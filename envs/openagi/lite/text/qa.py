"""Question Answering: extractive; every candidate span of every sentence is scored by the
IDF-weighted overlap of its sentence with the question, the expected answer type (quantity, date,
person, place or thing) and its distance to the question's words in the sentence."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from envs.openagi.lite.text.common import _check_texts, split_sentences
from envs.openagi.lite.text.ngram import language_model
from envs.openagi.task_data.texts import FUNCTION_WORDS, MASK

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
