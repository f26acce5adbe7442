"""The paper's metrics, done right, each normalised to [0, 1], and their aggregation.

- **BERTScore F1** (text outputs), implemented here on ``transformers`` rather than with the
  ``bert-score`` package (one less dependency, and it loads local directories like every other
  model here): contextual embeddings from one hidden layer (bert-score's default layer for the
  model, e.g. 40 for ``microsoft/deberta-xlarge-mnli``), cosine similarities, greedy matching.
  As in bert-score: [CLS]/[SEP]-style special tokens are match candidates but carry no weight,
  no idf weighting, no baseline rescaling (the paper used none). One difference: padding is
  excluded from the max (bert-score zeroes it, which only matters when every similarity is
  negative). F1 is clamped to [0, 1]; an empty prediction or reference scores 0 (1 if both are).
- **ViT score** (image outputs): cosine SIMILARITY of the ViT [CLS] embeddings of output and
  ground truth (the original code returned a distance and used it as a reward), clamped at 0.
- **CLIP score** (text -> image): torchmetrics' ``max(100 * cos, 0)`` divided by 100, i.e. the
  cosine of CLIP's projected image and text embeddings clamped at 0.

Clamping rather than ``(1 + cos) / 2`` keeps each score equal to the raw similarity in the usual
case, so numbers stay comparable with papers that report cosine similarities.

Aggregation: :func:`summarize_scores` gives the per-metric means (the rows of the paper's Table 5),
per-family means, and the overall score as the paper's weighted average of the metric scores
with each metric weighted by its number of tasks, i.e. the mean over tasks (or over samples).
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from envs.openagi.hf.config import HFBackendConfig
from envs.openagi.hf.images import check_image, check_text, to_pil
from envs.openagi.hf.loader import Loaded, ModelCache, load_model, resolve_device, resolve_dtype
from envs.openagi.hf.models import BERTSCORE, BERTSCORE_LAYERS, CLIP_SCORE, METRICS, VIT_SCORE

GIB = 1024**3


def _check_pairs(preds: Sequence[Any], refs: Sequence[Any], what: str) -> None:
    if len(preds) != len(refs):
        raise ValueError(f"{what}: {len(preds)} predictions but {len(refs)} references; expected equal lengths")


class HFMetricModels:
    """BERTScore / ViT / CLIP scores with models from the shared cache (loaded on first use)."""

    def __init__(self, config: HFBackendConfig | None = None, cache: ModelCache | None = None):
        self.config = config or HFBackendConfig()
        self.cache = cache or ModelCache(
            self.config.device,
            None if self.config.memory_budget_gib is None else int(self.config.memory_budget_gib * GIB),
        )

    def loaded(self, metric: str) -> Loaded:
        spec = self.config.metric_model(metric)
        dtype = resolve_dtype(self.config.metrics_dtype, self.cache.device, spec.half)
        key = (spec.kind, spec.model_id, str(dtype).removeprefix("torch."))
        return self.cache.get(key, lambda: load_model(spec, dtype, local_files_only=self.config.local_files_only))

    def compute(self, metric: str, preds: Sequence[Any], refs: Sequence[Any]) -> list[float]:
        """Scores in [0, 1] for ``metric`` in ``("bertscore", "vit", "clip")``."""
        if metric == BERTSCORE:
            return self.bertscore_f1(preds, refs)
        if metric == VIT_SCORE:
            return self.vit_score(preds, refs)
        if metric == CLIP_SCORE:
            return self.clip_score(preds, refs)
        raise ValueError(f"unknown metric {metric!r}; expected one of {METRICS}")

    def batch_metrics(self) -> dict[str, Callable[[Sequence[Any], Sequence[Any]], list[float]]]:
        """``{"bertscore", "vit", "clip"} -> fn(preds, targets)``, to register with the environment."""
        return {m: functools.partial(self.compute, m) for m in METRICS}

    # ---------------------------------------------------------------------------- BERTScore

    def bertscore(self, preds: Sequence[str], refs: Sequence[str]) -> list[tuple[float, float, float]]:
        """Raw (precision, recall, F1) per pair, unclamped."""
        _check_pairs(preds, refs, "bertscore")
        preds = [check_text(p, f"bertscore prediction {i}").strip() for i, p in enumerate(preds)]
        refs = [check_text(r, f"bertscore reference {i}").strip() for i, r in enumerate(refs)]
        unique = sorted({t for t in (*preds, *refs) if t}, key=len)
        emb = self._bert_embeddings(unique) if unique else {}
        out = []
        for p, r in zip(preds, refs):
            if not p or not r:
                v = 1.0 if p == r else 0.0
                out.append((v, v, v))
                continue
            (pe, pw), (re_, rw) = emb[p], emb[r]
            sim = pe @ re_.T  # (Lp, Lr) cosine similarities
            precision = float((sim.max(dim=1).values * pw).sum() / pw.sum())
            recall = float((sim.max(dim=0).values * rw).sum() / rw.sum())
            f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
            out.append((precision, recall, f1))
        return out

    def bertscore_f1(self, preds: Sequence[str], refs: Sequence[str]) -> list[float]:
        """BERTScore F1 clamped to [0, 1]."""
        return [min(max(f, 0.0), 1.0) for _, _, f in self.bertscore(preds, refs)]

    def _bert_embeddings(self, texts: list[str]) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        loaded = self.loaded(BERTSCORE)
        tok, model = loaded.processor, loaded.model
        spec = self.config.metric_model(BERTSCORE)
        layer = self.config.bertscore_num_layers
        if layer is None:
            layer = BERTSCORE_LAYERS.get(spec.model_id)
        max_len = min(getattr(tok, "model_max_length", 512) or 512, 512)
        space = _needs_prefix_space(tok)
        out: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        bs = self.config.metric_batch_size
        with torch.inference_mode():
            for start in range(0, len(texts), bs):
                chunk = texts[start : start + bs]
                enc = tok([" " + t if space else t for t in chunk], padding=True, truncation=True,
                          max_length=max_len, return_special_tokens_mask=True, return_tensors="pt")
                mask = enc["attention_mask"].bool()
                special = enc["special_tokens_mask"].bool()
                inputs = {k: v.to(loaded.device) for k, v in enc.items()
                          if k in ("input_ids", "attention_mask", "token_type_ids")}
                hidden = model(**inputs, output_hidden_states=True).hidden_states
                n_layers = len(hidden) - 1
                use = n_layers if layer is None else layer
                if not 0 <= use <= n_layers:
                    raise ValueError(f"bertscore_num_layers={use} but {spec.model_id!r} has {n_layers} layers")
                emb = F.normalize(hidden[use].float(), dim=-1).cpu()
                for i, text in enumerate(chunk):
                    keep = mask[i]
                    weights = (~special[i][keep]).float()
                    if weights.sum() == 0:  # only special tokens survived: weigh them all
                        weights = torch.ones_like(weights)
                    out[text] = (emb[i][keep], weights)
        return out

    # --------------------------------------------------------------------------- ViT / CLIP

    def vit_score(self, preds: Sequence[np.ndarray], refs: Sequence[np.ndarray]) -> list[float]:
        """Cosine similarity of ViT [CLS] embeddings, clamped to [0, 1]."""
        _check_pairs(preds, refs, "vit_score")
        ok = [i for i, x in enumerate(preds) if not _non_finite(x)]  # a NaN/inf prediction scores 0
        scores = [0.0] * len(preds)
        if not ok:
            return scores
        a = self._vit_embeddings([check_image(preds[i], f"vit_score prediction {i}") for i in ok])
        b = self._vit_embeddings([check_image(refs[i], f"vit_score reference {i}") for i in ok])
        for i, c in zip(ok, (a * b).sum(-1)):
            scores[i] = min(max(float(c), 0.0), 1.0)
        return scores

    def _vit_embeddings(self, images: list[np.ndarray]) -> torch.Tensor:
        loaded = self.loaded(VIT_SCORE)
        out = []
        bs = self.config.metric_batch_size
        with torch.inference_mode():
            for start in range(0, len(images), bs):
                px = loaded.processor(images=[to_pil(x) for x in images[start : start + bs]], return_tensors="pt")
                px = px["pixel_values"].to(loaded.device, loaded.dtype)
                cls = loaded.model(pixel_values=px).last_hidden_state[:, 0]
                out.append(F.normalize(cls.float(), dim=-1).cpu())
        return torch.cat(out)

    def clip_score(self, images: Sequence[np.ndarray], texts: Sequence[str]) -> list[float]:
        """CLIP score / 100: cosine of CLIP image and text embeddings, clamped to [0, 1]."""
        _check_pairs(images, texts, "clip_score")
        ok = [i for i, x in enumerate(images) if not _non_finite(x)]  # a NaN/inf image scores 0
        if len(ok) < len(images):
            kept = self.clip_score([images[i] for i in ok], [texts[i] for i in ok]) if ok else []
            out = [0.0] * len(images)
            for i, v in zip(ok, kept):
                out[i] = v
            return out
        images = [check_image(x, f"clip_score image {i}") for i, x in enumerate(images)]
        texts = [check_text(t, f"clip_score text {i}") for i, t in enumerate(texts)]
        loaded = self.loaded(CLIP_SCORE)
        proc, model = loaded.processor, loaded.model
        max_len = getattr(model.config, "text_config", model.config).max_position_embeddings
        scores: list[float] = []
        bs = self.config.metric_batch_size
        with torch.inference_mode():
            for start in range(0, len(images), bs):
                enc = proc(text=list(texts[start : start + bs]), images=[to_pil(x) for x in images[start : start + bs]],
                           padding=True, truncation=True, max_length=max_len, return_tensors="pt")
                enc = {k: (v.to(loaded.device, loaded.dtype) if v.is_floating_point() else v.to(loaded.device))
                       for k, v in enc.items() if k in ("input_ids", "attention_mask", "pixel_values")}
                out = model(**enc)
                img = F.normalize(out.image_embeds.float(), dim=-1)
                txt = F.normalize(out.text_embeds.float(), dim=-1)
                scores.extend(min(max(float(c), 0.0), 1.0) for c in (img * txt).sum(-1))
        return scores


def _non_finite(x: Any) -> bool:
    """An image array holding NaN or inf (scored 0: it is no image of anything)."""
    return (isinstance(x, np.ndarray) and x.size > 0 and np.issubdtype(x.dtype, np.inexact)
            and not bool(np.isfinite(x).all()))


def _needs_prefix_space(tok: Any) -> bool:
    """Byte-level BPE tokenizers (RoBERTa, DeBERTa) encode a word differently after a space;
    bert-score encodes sentences with a prefix space, as words appear mid-sentence."""
    try:
        return (tok("hello", add_special_tokens=False)["input_ids"]
                != tok(" hello", add_special_tokens=False)["input_ids"])
    except Exception:  # a tokenizer that cannot encode this probe: leave the text alone
        return False


# ------------------------------------------------------------------------ functional wrappers

_DEFAULT_CACHES: dict[str, ModelCache] = {}


def _metric_models(metric: str, model: str | None, device: str | None, **config: Any) -> HFMetricModels:
    dev = resolve_device(device)
    cache = _DEFAULT_CACHES.setdefault(str(dev), ModelCache(dev))
    cfg = HFBackendConfig(metric_models={metric: model} if model else {}, device=str(dev), **config)
    return HFMetricModels(cfg, cache)


def bertscore_f1(
    preds: Sequence[str], refs: Sequence[str], model: str | None = None, *, num_layers: int | None = None,
    device: str | None = None, batch_size: int = 32, local_files_only: bool = False,
) -> list[float]:
    """BERTScore F1 in [0, 1] per pair; ``model`` defaults to microsoft/deberta-xlarge-mnli."""
    return _metric_models(BERTSCORE, model, device, bertscore_num_layers=num_layers, metric_batch_size=batch_size,
                   local_files_only=local_files_only).bertscore_f1(preds, refs)


def vit_score(
    pred_images: Sequence[np.ndarray], ref_images: Sequence[np.ndarray], model: str | None = None, *,
    device: str | None = None, batch_size: int = 32, local_files_only: bool = False,
) -> list[float]:
    """ViT cosine similarity in [0, 1] per pair; ``model`` defaults to google/vit-base-patch16-224."""
    return _metric_models(VIT_SCORE, model, device, metric_batch_size=batch_size,
                   local_files_only=local_files_only).vit_score(pred_images, ref_images)


def clip_score(
    images: Sequence[np.ndarray], texts: Sequence[str], model: str | None = None, *,
    device: str | None = None, batch_size: int = 32, local_files_only: bool = False,
) -> list[float]:
    """CLIP score / 100 in [0, 1] per pair; ``model`` defaults to openai/clip-vit-base-patch16."""
    return _metric_models(CLIP_SCORE, model, device, metric_batch_size=batch_size,
                   local_files_only=local_files_only).clip_score(images, texts)


# ------------------------------------------------------------------------------ aggregation


@dataclass(frozen=True)
class TaskScore:
    """One task's mean score under its metric (``n_samples`` weighs it in sample weighting)."""

    task_id: int
    family: str
    metric: str
    score: float
    n_samples: int = 1

    def __post_init__(self) -> None:
        if not (isinstance(self.score, (int, float)) and math.isfinite(self.score) and 0.0 <= self.score <= 1.0):
            raise ValueError(f"task {self.task_id}: score {self.score!r} is not a number in [0, 1]")
        if not isinstance(self.n_samples, int) or self.n_samples < 1:
            raise ValueError(f"task {self.task_id}: n_samples={self.n_samples!r}; expected an int >= 1")


@dataclass(frozen=True)
class ScoreSummary:
    overall: float
    by_metric: dict[str, float] = field(default_factory=dict)
    by_family: dict[str, float] = field(default_factory=dict)
    tasks_by_metric: dict[str, int] = field(default_factory=dict)
    n_tasks: int = 0


def summarize_scores(scores: Iterable[TaskScore], weighting: str = "task") -> ScoreSummary:
    """Per-metric and per-family means and the overall weighted average.

    ``weighting="task"``: every task counts once (overall = sum_m n_m * mean_m / sum_m n_m, the
    paper's weighted average of the CLIP, BERT and ViT scores); ``"sample"``: every sample does.
    """
    if weighting not in ("task", "sample"):
        raise ValueError(f"weighting={weighting!r}; expected 'task' or 'sample'")
    scores = list(scores)
    if not scores:
        raise ValueError("summarize_scores: no task scores given")
    seen: set[int] = set()
    for s in scores:
        if s.task_id in seen:
            raise ValueError(f"summarize_scores: task {s.task_id} appears twice")
        seen.add(s.task_id)

    def mean(items: list[TaskScore]) -> float:
        w = [1 if weighting == "task" else s.n_samples for s in items]
        return sum(wi * s.score for wi, s in zip(w, items)) / sum(w)

    by_metric: dict[str, list[TaskScore]] = defaultdict(list)
    by_family: dict[str, list[TaskScore]] = defaultdict(list)
    for s in scores:
        by_metric[s.metric].append(s)
        by_family[s.family].append(s)
    return ScoreSummary(
        overall=mean(scores),
        by_metric={m: mean(v) for m, v in by_metric.items()},
        by_family={f: mean(v) for f, v in by_family.items()},
        tasks_by_metric={m: len(v) for m, v in by_metric.items()},
        n_tasks=len(scores),
    )
