"""The task suite: OpenAGI's template grammar, generated in code, deterministic from a seed.

``Given {input}, how to {output} step by step?`` over degraded images, (clozed) English text,
image + query (VQA) and document + query (QA). :func:`task_specs` writes the grammar out (the
``full`` suite is OpenAGI's 185 tasks: 117 linear, 68 nonlinear); :func:`build_suite` attaches
samples from a data source. The ``lite`` suite is the part of the grammar the offline zoo can
solve (English outputs; restoration, class labels, sentiment, summaries, question answering).

Run ``python -m envs.openagi.suite --suite full --count`` to count tasks without loading data.
"""

from __future__ import annotations

import argparse
import functools
import itertools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from envs.openagi.plans import LinearPlan, NonlinearPlan, Plan, PlanLimits
from envs.openagi.registry import IMAGE, TEXT
from envs.openagi.tasks import Sample, Task

# Degradation words in the order OpenAGI writes them in descriptions.
IMAGE_DEGRADATIONS = ("low-resolutioned", "noisy", "blurry", "grayscale")
CLOZED = "clozed"

# The plan space searched by planners and the oracle on each suite: every reference plan fits.
SUITE_LIMITS = {"lite": PlanLimits(max_tools=5, max_branch=2, max_tail=1),
                "full": PlanLimits(max_tools=6, max_branch=4, max_tail=2)}

# The restoration expert that undoes each degradation: the reference plan's fixed rule (and the
# description-order plan of the lite image report, envs.openagi.lite.image_experts).
RESTORER = {
    "low-resolutioned": "Image Super Resolution",
    "noisy": "Image Denoising",
    "blurry": "Image Deblurring",
    "grayscale": "Colorization",
    CLOZED: "Fill Mask",
}


@dataclass(frozen=True)
class TaskSpec:
    """A task as the grammar defines it, before any data is attached."""

    description: str
    inputs: tuple[str, ...]
    target: str
    output_kind: str  # image | class_label | caption | object_names | generated_image |
    #                   summary | sentiment | translation | answer
    language: str  # "en" | "de"
    degradations: tuple[tuple[str, ...], ...]  # per input
    reference_plan: Plan

    @property
    def family(self) -> str:
        kinds = {"image": "restoration", "answer": "vqa" if self.inputs[0] == IMAGE else "qa"}
        base = kinds.get(self.output_kind, self.output_kind)
        return base if self.language == "en" else f"{base}_de"


def _image_phrase(degr: tuple[str, ...]) -> str:
    return " ".join((*degr, "image"))


def _text_phrase(degr: tuple[str, ...], noun: str) -> str:
    return " ".join((*degr, "English", noun))


def _restore(degr: tuple[str, ...]) -> tuple[str, ...]:
    """The reference rule: one restorer per degradation, in description order (not the best)."""
    return tuple(RESTORER[d] for d in degr)


def _image_subsets() -> list[tuple[str, ...]]:
    subsets = []
    for r in range(1, len(IMAGE_DEGRADATIONS) + 1):
        subsets.extend(itertools.combinations(IMAGE_DEGRADATIONS, r))
    return subsets


_TEXT_OUTPUTS = {
    # output_kind: (phrase template, tool)
    "caption": ("return the caption in {lang}", "Image Captioning"),
    "class_label": ("return the class label in {lang}", "Image Classification"),
    "object_names": ("return the object names in {lang}", "Object Detection"),
}
_LANG = {"en": "English", "de": "German"}


def _desc(inp: str, out: str) -> str:
    return f"Given {inp}, how to {out} step by step?"


def _translate(lang: str) -> tuple[str, ...]:
    return ("Machine Translation",) if lang == "de" else ()


def task_specs(suite: str = "full") -> list[TaskSpec]:
    """The grammar's tasks in OpenAGI's block order. ``suite`` is "full" or "lite"."""
    if suite not in ("full", "lite"):
        raise ValueError(f"unknown suite {suite!r}; expected 'full' or 'lite'")
    full = suite == "full"
    langs = ("en", "de") if full else ("en",)
    specs: list[TaskSpec] = []
    subsets = _image_subsets()
    # image -> image
    for d in subsets:
        specs.append(TaskSpec(_desc(_image_phrase(d), "return the regular image"), (IMAGE,), IMAGE,
                              "image", "en", (d,), LinearPlan(_restore(d))))
    # image -> text
    kinds = ("caption", "class_label", "object_names") if full else ("class_label",)
    for d in subsets:
        for kind in kinds:
            phrase, tool = _TEXT_OUTPUTS[kind]
            for lang in langs:
                specs.append(TaskSpec(_desc(_image_phrase(d), phrase.format(lang=_LANG[lang])),
                                      (IMAGE,), TEXT, kind, lang, (d,),
                                      LinearPlan((*_restore(d), tool, *_translate(lang)))))
    text_degr = ((), (CLOZED,))
    # text -> image
    if full:
        for d in text_degr:
            specs.append(TaskSpec(_desc(_text_phrase(d, "text"), "generate a image"), (TEXT,), IMAGE,
                                  "generated_image", "en", (d,),
                                  LinearPlan((*_restore(d), "Text to Image Generation"))))
    # text -> text
    for d in text_degr:
        for kind, tool in (("summary", "Text Summarization"), ("sentiment", "Sentiment Analysis")):
            word = "summarization" if kind == "summary" else "sentiment"
            for lang in langs:
                specs.append(TaskSpec(_desc(_text_phrase(d, "text"), f"return the {word} in {_LANG[lang]}"),
                                      (TEXT,), TEXT, kind, lang, (d,),
                                      LinearPlan((*_restore(d), tool, *_translate(lang)))))
        if full:
            specs.append(TaskSpec(_desc(_text_phrase(d, "text"), "translate the text in German"),
                                  (TEXT,), TEXT, "translation", "de", (d,),
                                  LinearPlan((*_restore(d), "Machine Translation"))))
    # two inputs -> answer: image + query (VQA, full suite only), document + query (QA)
    pairs = [("Visual Question Answering", IMAGE, subsets, _image_phrase)] if full else []
    pairs.append(("Question Answering", TEXT, text_degr, lambda d: _text_phrase(d, "document")))
    for join, first, first_degr, phrase in pairs:
        for d in first_degr:
            for q in text_degr:
                for lang in langs:
                    specs.append(TaskSpec(
                        _desc(f"{phrase(d)} and {_text_phrase(q, 'query')}", f"answer the question in {_LANG[lang]}"),
                        (first, TEXT), TEXT, "answer", lang, (d, q),
                        NonlinearPlan((_restore(d), _restore(q)), join, _translate(lang))))
    return specs


# ------------------------------------------------------------------------------ lite samples

LITE_METRICS = {
    "image": "image_similarity",
    "class_label": "exact_match",
    "sentiment": "exact_match",
    "summary": "summary_similarity",  # a copy of the passage must not beat a summary
    "answer": "token_f1",
}


def _lite_samples(spec: TaskSpec, n: int, seed: int) -> list[tuple[tuple, object]]:
    """(inputs, target) pairs for one lite task: clean data, then the task's degradations."""
    from envs.openagi.task_data import images, texts  # heavy: scikit-learn (~1 s), only to build samples

    rng = np.random.default_rng(seed)

    def deg_text(text: str, degr: tuple[str, ...]) -> str:
        return texts.cloze(text, rng) if CLOZED in degr else text

    kind, (d0, *rest) = spec.output_kind, spec.degradations
    if kind == "image":
        return [((images.degrade_image(x, d0, rng),), x) for x in images.photo_crops(n, seed)]
    if kind == "class_label":
        return [((images.degrade_image(x, d0, rng),), y) for x, y in images.digit_images(n, seed)]
    if kind == "sentiment":
        return [((deg_text(x, d0),), y) for x, y in texts.review_samples(n, seed)]
    if kind == "summary":
        return [((deg_text(x, d0),), y) for x, y in texts.summary_samples(n, seed)]
    if kind == "answer" and spec.inputs == (TEXT, TEXT):
        return [((deg_text(doc, d0), deg_text(q, rest[0])), a) for doc, q, a in texts.qa_samples(n, seed)]
    raise ValueError(f"the lite suite has no data for {spec.description!r}")


SampleSource = Callable[[TaskSpec, int, int], list]


@functools.lru_cache(maxsize=8)
def build_suite(suite: str = "lite", seed: int = 0, n_samples: int = 20) -> tuple[Task, ...]:
    """Tasks with samples, deterministic from ``seed``. Cached: the same call returns the same tasks.

    Each task draws from its own RNG stream (seeded by ``(seed, task id)``).
    """
    if n_samples < 1:
        raise ValueError(f"n_samples={n_samples}: expected at least 1 sample per task")
    if suite != "lite":
        raise ValueError(
            f"suite {suite!r} has no offline data source; the lite suite is built here "
            "(the full suite's hub datasets come with the hf backend)"
        )
    tasks = []
    for i, spec in enumerate(task_specs(suite)):
        task_seed = int(np.random.SeedSequence([seed, i]).generate_state(1)[0])
        pairs = _lite_samples(spec, n_samples, task_seed)
        task = Task(id=i, description=spec.description, inputs=spec.inputs, target=spec.target,
                    metric=LITE_METRICS[spec.output_kind], family=spec.family,
                    degradations=spec.degradations, reference_plan=spec.reference_plan)
        task.samples = [Sample(f"{suite}-s{seed}/{task.name}/{j}", tuple(x), y)
                        for j, (x, y) in enumerate(pairs)]
        tasks.append(task)
    return tuple(tasks)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--suite", default="lite", choices=("lite", "full"))
    p.add_argument("--count", action="store_true", help="only count tasks (no data is loaded)")
    args = p.parse_args(argv)
    specs = task_specs(args.suite)
    linear = sum(len(s.inputs) == 1 for s in specs)
    if not args.count:
        for i, s in enumerate(specs):
            print(f"{i:3d}  {s.description}  ->  {s.reference_plan}")
    print(f"{args.suite}: {len(specs)} tasks: {linear} linear, {len(specs) - linear} nonlinear")


if __name__ == "__main__":
    main()
