"""A small real environment for trainer tests: string tools under OpenAGI tool names.

The tools are exact string operations, so rewards are known: for the task "Given clozed English
text, how to translate the text in German", only ``Fill Mask, Machine Translation`` (fill, then
upper-case) is fully right. The names are OpenAGI's, so the tiny test tokenizers know them.
"""

from __future__ import annotations

from envs.openagi.env import OpenAGIEnv
from envs.openagi.plans import LinearPlan, NonlinearPlan, PlanLimits
from envs.openagi.registry import TEXT, ToolRegistry
from envs.openagi.tasks import Sample, Task


def toy_registry() -> ToolRegistry:
    reg = ToolRegistry()
    reg.register("Fill Mask", TEXT, TEXT, lambda xs: [x.replace("[MASK]", "cat") for x in xs])
    reg.register("Machine Translation", TEXT, TEXT, lambda xs: [x.upper() for x in xs])
    reg.register("Question Answering", (TEXT, TEXT), TEXT, lambda ds, qs: [d.split()[-1] for d in ds])
    return reg


def _equal(preds, targets):
    return [float(p == t) for p, t in zip(preds, targets)]


def toy_tasks() -> list[Task]:
    words = ["the [MASK] sat", "a [MASK] ran", "my [MASK] slept", "one [MASK] ate"]
    lin = Task(0, "Given clozed English text, how to translate the text in German step by step?", (TEXT,), TEXT,
               "toy_equal", "translation_de", (("clozed",),), LinearPlan(("Fill Mask", "Machine Translation")))
    lin.samples = [Sample(f"toy0/{i}", (w,), w.replace("[MASK]", "cat").upper()) for i, w in enumerate(words)]
    qa = Task(1, "Given English document and clozed English query, how to answer the question in English step by step?",
              (TEXT, TEXT), TEXT, "toy_equal", "qa", ((), ("clozed",)), NonlinearPlan(((), ("Fill Mask",)),
                                                                                         "Question Answering"))
    qa.samples = [Sample(f"toy1/{i}", (w.replace("[MASK]", "dog"), "what [MASK]?"), "DOG" if i % 2 else "sat")
                  for i, w in enumerate(words)]
    return [lin, qa]


def toy_env(**kw) -> OpenAGIEnv:
    return OpenAGIEnv(registry=toy_registry(), tasks=toy_tasks(), limits=PlanLimits(2, 1, 1),
                      metrics={"toy_equal": _equal}, **kw)
