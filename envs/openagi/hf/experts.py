"""The 15 OpenAGI tools as batched functions over hub models (see ``models`` for the table).

Each tool loads its model on first call through the shared :class:`ModelCache`, splits its batch
into chunks of the configured batch size, and returns outputs in the project's conventions
(images float32 (H, W, 3) in [0, 1]; text ``str``). Output conventions per tool:

- Image Classification: the top-1 ImageNet label, lowercased, first synonym only
  (``"tabby, tabby cat"`` -> ``"tabby"``), see :func:`normalise_label`.
- Object Detection: detected class names above ``threshold`` (0.9, DETR's model-card value),
  highest score first, each name once, joined by ``", "``; ``""`` when nothing is detected.
- Image Super Resolution: Swin2SR's x2 output (2H, 2W). Deblurring / Denoising: the real-world
  x4 Swin2SR output area-downsampled back to (H, W) (``restore_input_size``).
- Image Captioning / Text Summarization / Machine Translation: beam-search text, stripped. A
  T5-family model gets its task prefix (``task_specific_params`` or ``"translate English to
  German: "`` / ``"summarize: "``); other models get none.
- Text Generation: greedy continuation; with ``return_full_text`` (the HF pipeline default) the
  prompt followed by the continuation.
- Sentiment Analysis / Visual Question Answering: the top-1 label, lowercased.
- Question Answering (inputs: document, query): the best span of the document, searched per
  sample over overlapping windows (the original code took one argmax over the flattened batch).
- Fill Mask: the text with every ``[MASK]`` replaced by the model's top-1 word.
- Text to Image Generation / Colorization (diffusers): seeded per sample from its content, so an
  output never depends on the batch it ran in.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from envs.openagi.hf.config import HFBackendConfig
from envs.openagi.hf.images import (
    check_image,
    check_text,
    content_seed,
    from_tensor,
    group_by_shape,
    keep_luminance,
    resize,
    to_pil,
    to_tensor,
)
from envs.openagi.hf.loader import Loaded, ModelCache, load_model, resolve_dtype
from envs.openagi.tools import SPECS

MASK = "[MASK]"
_T5_TYPES = ("t5", "mt5", "umt5", "longt5")
_T5_PREFIXES = {"translation_en_to_de": "translate English to German: ", "summarization": "summarize: "}


def normalise_label(label: str) -> str:
    """A class label as the project writes it: lowercase, first synonym, spaces not underscores."""
    return label.split(",")[0].replace("_", " ").strip().lower()


class HFExperts:
    """The tool implementations over one config and one model cache."""

    def __init__(self, config: HFBackendConfig, cache: ModelCache):
        self.config = config
        self.cache = cache
        self._impls: dict[str, Callable[..., list[Any]]] = {
            "Image Classification": self._image_classification,
            "Colorization": self._colorization,
            "Object Detection": self._object_detection,
            "Image Super Resolution": self._restore,
            "Image Captioning": self._image_captioning,
            "Text to Image Generation": self._text_to_image,
            "Sentiment Analysis": self._sentiment,
            "Question Answering": self._question_answering,
            "Text Summarization": self._seq2seq,
            "Text Generation": self._text_generation,
            "Visual Question Answering": self._visual_qa,
            "Image Deblurring": self._restore,
            "Image Denoising": self._restore,
            "Machine Translation": self._seq2seq,
            "Fill Mask": self._fill_mask,
        }
        assert set(self._impls) == set(SPECS)

    # ------------------------------------------------------------------------------ plumbing

    def model_key(self, tool: str) -> tuple[str, str, str]:
        """The cache key of ``tool``'s model: tools sharing a checkpoint and dtype share it."""
        spec = self.config.expert(tool)
        dtype = resolve_dtype(self.config.dtype, self.cache.device, spec.half)
        return (spec.kind, spec.model_id, str(dtype).removeprefix("torch."))

    def loaded(self, tool: str) -> Loaded:
        spec = self.config.expert(tool)
        dtype = resolve_dtype(self.config.dtype, self.cache.device, spec.half)
        return self.cache.get(
            self.model_key(tool), lambda: load_model(spec, dtype, local_files_only=self.config.local_files_only)
        )

    def fn(self, tool: str) -> Callable[..., list[Any]]:
        """The batched function registered for ``tool``."""
        spec = SPECS[tool]

        def run(*batches: Sequence[Any]) -> list[Any]:
            checked = [
                [
                    (check_image if modality == "image" else check_text)(x, f"{tool} input {k}, sample {i}")
                    for i, x in enumerate(batch)
                ]
                for k, (modality, batch) in enumerate(zip(spec.inputs, batches))
            ]
            n = len(checked[0]) if checked else 0
            if n == 0:
                return []
            loaded = self.loaded(tool)
            size = self.config.tool_batch_size(tool)
            out: list[Any] = []
            with torch.inference_mode():
                for start in range(0, n, size):
                    out.extend(self._impls[tool](tool, loaded, *[b[start : start + size] for b in checked]))
            return out

        run.__name__ = f"hf_{tool.lower().replace(' ', '_')}"
        run.__doc__ = f"{tool} with the hf backend ({self.config.expert(tool).model_id})."
        return run

    def _inputs(self, batch: Any, loaded: Loaded, model: Any = None) -> dict[str, Any]:
        """Move a processor's output to the model's device; float tensors to its dtype.

        Keys the model's ``forward`` does not take (e.g. ``token_type_ids`` for DistilBERT) are
        dropped when ``model`` is given.
        """
        accepted = None
        if model is not None:
            params = inspect.signature(model.forward).parameters.values()
            named = {p.name for p in params if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
            accepted = named or None  # a bare ``forward(**kwargs)`` gets everything
        out = {}
        for k, v in dict(batch).items():
            if accepted is not None and k not in accepted:
                continue
            if isinstance(v, torch.Tensor):
                v = v.to(loaded.device, dtype=loaded.dtype if v.is_floating_point() else None)
            out[k] = v
        return out

    def _generate(self, tool: str, model: Any, extra: dict[str, Any] | None = None, **inputs: Any) -> torch.Tensor:
        kw = {**(extra or {}), **self.config.tool_generate_kwargs(tool)}
        if "max_new_tokens" in kw:
            kw.pop("max_length", None)
        if kw.get("do_sample"):
            torch.manual_seed(self.config.seed)
        return model.generate(**inputs, **kw)

    def _max_len(self, tokenizer: Any, model: Any, default: int = 512) -> int:
        limits = [tokenizer.model_max_length] if 0 < getattr(tokenizer, "model_max_length", 0) < 1_000_000 else []
        for attr in ("max_position_embeddings", "n_positions"):
            v = getattr(model.config, attr, None)
            if isinstance(v, int) and v > 0:
                limits.append(v)
        return min(limits) if limits else default

    # ------------------------------------------------------------------------------- images

    def _image_classification(self, tool: str, loaded: Loaded, images: list[np.ndarray]) -> list[str]:
        batch = loaded.processor(images=[to_pil(x) for x in images], return_tensors="pt")
        logits = loaded.model(**self._inputs(batch, loaded)).logits
        id2label = loaded.model.config.id2label
        return [normalise_label(id2label[int(i)]) for i in logits.argmax(-1)]

    def _object_detection(self, tool: str, loaded: Loaded, images: list[np.ndarray]) -> list[str]:
        threshold = float(self.config.tool_options(tool)["threshold"])
        batch = loaded.processor(images=[to_pil(x) for x in images], return_tensors="pt")
        outputs = loaded.model(**self._inputs(batch, loaded, loaded.model))
        for name in ("logits", "pred_boxes"):
            setattr(outputs, name, getattr(outputs, name).float())
        results = loaded.processor.post_process_object_detection(
            outputs, threshold=threshold, target_sizes=[x.shape[:2] for x in images]
        )
        id2label = loaded.model.config.id2label
        texts = []
        for res in results:
            order = torch.argsort(res["scores"], descending=True)
            names: list[str] = []
            for j in order.tolist():
                name = normalise_label(str(id2label.get(int(res["labels"][j]), "")))
                if name and name != "n/a" and name not in names:
                    names.append(name)
            texts.append(", ".join(names))
        return texts

    def _restore(self, tool: str, loaded: Loaded, images: list[np.ndarray]) -> list[np.ndarray]:
        """Swin2SR on same-shape groups; [0, 1] floats go in directly (the model pads itself)."""
        back_to_input = bool(self.config.tool_options(tool).get("restore_input_size", False))
        window = int(getattr(loaded.model.config, "window_size", 8))
        out: list[np.ndarray | None] = [None] * len(images)
        for idx in group_by_shape(images):
            h, w = images[idx[0]].shape[:2]
            # symmetric pre-padding to the window size: the model's own reflect padding needs the
            # image to be larger than the pad, which tiny inputs are not
            ph, pw = (-h) % window, (-w) % window
            batch = [np.pad(images[i], ((0, ph), (0, pw), (0, 0)), mode="symmetric") for i in idx]
            x = to_tensor(batch).to(loaded.device, loaded.dtype)
            y = loaded.model(pixel_values=x).reconstruction.float()
            scale = y.shape[-2] // x.shape[-2]
            y = y[:, :, : h * scale, : w * scale]
            if back_to_input and scale != 1:
                y = torch.nn.functional.interpolate(y, size=(h, w), mode="area")
            for i, img in zip(idx, from_tensor(y)):
                out[i] = img
        return out  # type: ignore[return-value]

    def _image_captioning(self, tool: str, loaded: Loaded, images: list[np.ndarray]) -> list[str]:
        image_processor, tokenizer = loaded.processor
        pixel_values = image_processor(images=[to_pil(x) for x in images], return_tensors="pt").pixel_values
        ids = self._generate(tool, loaded.model, pixel_values=pixel_values.to(loaded.device, loaded.dtype))
        return [t.strip() for t in tokenizer.batch_decode(ids, skip_special_tokens=True)]

    def _visual_qa(self, tool: str, loaded: Loaded, images: list[np.ndarray], questions: list[str]) -> list[str]:
        batch = loaded.processor(
            images=[to_pil(x) for x in images], text=questions, padding=True, truncation=True,
            max_length=self._max_len(loaded.processor.tokenizer, loaded.model, 40), return_tensors="pt",
        )
        logits = loaded.model(**self._inputs(batch, loaded, loaded.model)).logits
        id2label = loaded.model.config.id2label
        return [str(id2label[int(i)]).strip().lower() for i in logits.argmax(-1)]

    def _diffusion_generators(self, seeds: list[int]) -> list[torch.Generator]:
        # CPU generators: the same latents on any device, so results match across machines
        return [torch.Generator("cpu").manual_seed(s) for s in seeds]

    def _text_to_image(self, tool: str, loaded: Loaded, prompts: list[str]) -> list[np.ndarray]:
        gens = self._diffusion_generators([content_seed(self.config.seed, p) for p in prompts])
        result = loaded.model(prompt=prompts, generator=gens, output_type="np",
                              **self.config.tool_generate_kwargs(tool))
        return [np.clip(np.asarray(im, dtype=np.float32), 0.0, 1.0) for im in result.images]

    def _colorization(self, tool: str, loaded: Loaded, images: list[np.ndarray]) -> list[np.ndarray]:
        opts = self.config.tool_options(tool)
        out: list[np.ndarray | None] = [None] * len(images)
        for idx in group_by_shape(images):
            group = [images[i] for i in idx]
            gens = self._diffusion_generators([content_seed(self.config.seed, g.tobytes()) for g in group])
            result = loaded.model(
                prompt=[opts["prompt"]] * len(group), image=[to_pil(g) for g in group], generator=gens,
                output_type="np", **self.config.tool_generate_kwargs(tool),
            )
            for i, src, col in zip(idx, group, result.images):
                col = resize(np.clip(np.asarray(col, dtype=np.float32), 0.0, 1.0), src.shape[:2])
                out[i] = keep_luminance(src, col) if opts.get("keep_luminance", True) else col
        return out  # type: ignore[return-value]

    # --------------------------------------------------------------------------------- text

    def _sentiment(self, tool: str, loaded: Loaded, texts: list[str]) -> list[str]:
        tok = loaded.processor
        batch = tok(texts, padding=True, truncation=True, max_length=self._max_len(tok, loaded.model),
                    return_tensors="pt")
        logits = loaded.model(**self._inputs(batch, loaded, loaded.model)).logits
        id2label = loaded.model.config.id2label
        return [str(id2label[int(i)]).strip().lower() for i in logits.argmax(-1)]

    def _task_prefix_and_kwargs(self, tool: str, model: Any) -> tuple[str, dict[str, Any]]:
        task = self.config.tool_options(tool).get("task", "")
        params = dict((getattr(model.config, "task_specific_params", None) or {}).get(task, {}))
        prefix = params.pop("prefix", None)
        if prefix is None:
            prefix = _T5_PREFIXES.get(task, "") if getattr(model.config, "model_type", "") in _T5_TYPES else ""
        return prefix, params

    def _seq2seq(self, tool: str, loaded: Loaded, texts: list[str]) -> list[str]:
        tok = loaded.processor
        prefix, task_kwargs = self._task_prefix_and_kwargs(tool, loaded.model)
        batch = tok([prefix + t for t in texts], padding=True, truncation=True,
                    max_length=self._max_len(tok, loaded.model), return_tensors="pt")
        inputs = self._inputs(batch, loaded, loaded.model)
        ids = self._generate(tool, loaded.model, task_kwargs, input_ids=inputs["input_ids"],
                             attention_mask=inputs["attention_mask"])
        return [t.strip() for t in tok.batch_decode(ids, skip_special_tokens=True)]

    def _text_generation(self, tool: str, loaded: Loaded, texts: list[str]) -> list[str]:
        tok, model = loaded.processor, loaded.model
        kw = self.config.tool_generate_kwargs(tool)
        room = self._max_len(tok, model, 1024) - int(kw.get("max_new_tokens", 20))
        if room < 1:
            raise ValueError(f"{tool}: max_new_tokens={kw.get('max_new_tokens')} leaves no room for the prompt")
        # an empty prompt still needs one token to continue from
        prompts = [t if t.strip() else (tok.bos_token or tok.eos_token) for t in texts]
        batch = tok(prompts, padding=True, truncation=True, max_length=room, return_tensors="pt")
        inputs = self._inputs(batch, loaded, model)
        ids = self._generate(tool, model, {"pad_token_id": tok.pad_token_id}, input_ids=inputs["input_ids"],
                             attention_mask=inputs["attention_mask"])
        new = tok.batch_decode(ids[:, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
        full = bool(self.config.tool_options(tool).get("return_full_text", True))
        return [(t + n if full else n).strip() for t, n in zip(texts, new)]

    def _fill_mask(self, tool: str, loaded: Loaded, texts: list[str]) -> list[str]:
        tok, model = loaded.processor, loaded.model
        if tok.mask_token is None:
            raise ValueError(f"{tool}: tokenizer of {self.config.expert(tool).model_id!r} has no mask token")
        pieces = [t.split(MASK) for t in texts]
        batch = tok([tok.mask_token.join(p) for p in pieces], padding=True, truncation=True,
                    max_length=self._max_len(tok, model), return_tensors="pt")
        logits = model(**self._inputs(batch, loaded, model)).logits.float()
        logits[..., tok.all_special_ids] = float("-inf")  # never "fill" with [CLS], [SEP], [MASK]...
        out = []
        for row, parts in enumerate(pieces):
            positions = (batch["input_ids"][row] == tok.mask_token_id).nonzero().flatten().tolist()
            words = [
                tok.convert_tokens_to_string([tok.convert_ids_to_tokens(int(logits[row, p].argmax()))]).strip()
                .removeprefix("##")  # a lone WordPiece continuation, e.g. "##s"
                for p in positions
            ]
            words += [MASK] * (len(parts) - 1 - len(words))  # masks cut off by truncation stay masks
            text = parts[0]
            for word, part in zip(words, parts[1:]):
                text += word + part
            out.append(text)
        return out

    def _question_answering(self, tool: str, loaded: Loaded, documents: list[str], queries: list[str]) -> list[str]:
        """Best span per sample over overlapping windows of the document (SQuAD-style)."""
        tok, model = loaded.processor, loaded.model
        opts = self.config.tool_options(tool)
        max_len = min(int(opts["max_length"]), self._max_len(tok, model))
        stride = min(int(opts["stride"]), max_len // 2)
        queries = [_truncate_text(tok, q, int(opts["max_question_tokens"])) for q in queries]
        batch = tok(queries, documents, truncation="only_second", max_length=max_len, stride=stride,
                    return_overflowing_tokens=True, return_offsets_mapping=True, padding=True, return_tensors="pt")
        sample_of = batch["overflow_to_sample_mapping"].tolist()
        offsets = batch["offset_mapping"].tolist()
        out = model(**self._inputs({k: v for k, v in batch.items()
                                    if k in ("input_ids", "attention_mask", "token_type_ids")},
                                   loaded, model))
        starts, ends = out.start_logits.float(), out.end_logits.float()
        best: list[tuple[float, str]] = [(float("-inf"), "")] * len(documents)
        max_answer = int(opts["max_answer_tokens"])
        for f, s in enumerate(sample_of):
            in_doc = torch.tensor([sid == 1 for sid in batch.sequence_ids(f)], device=starts.device)
            if not bool(in_doc.any()):
                continue
            st = starts[f].masked_fill(~in_doc, float("-inf"))
            en = ends[f].masked_fill(~in_doc, float("-inf"))
            scores = st[:, None] + en[None, :]
            n = scores.shape[0]
            valid = torch.ones(n, n, dtype=torch.bool, device=scores.device).triu().tril(max_answer - 1)
            scores = scores.masked_fill(~valid, float("-inf"))
            flat = int(scores.argmax())
            i, j = divmod(flat, n)
            score = float(scores[i, j])
            if score > best[s][0]:
                best[s] = (score, documents[s][offsets[f][i][0] : offsets[f][j][1]].strip())
        return [text for _, text in best]


def _truncate_text(tok: Any, text: str, max_tokens: int) -> str:
    """Cut ``text`` after ``max_tokens`` tokens (so a long query cannot crowd out the document)."""
    enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    if len(enc["input_ids"]) <= max_tokens:
        return text
    return text[: enc["offset_mapping"][max_tokens - 1][1]]

