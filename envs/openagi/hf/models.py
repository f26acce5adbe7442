"""The `hf` backend's model table: which hub checkpoint runs each OpenAGI tool, and each metric.

The defaults are the paper's models (``shared/reference/openagi.md``) wherever those are on the
Hugging Face hub; every id can be overridden per tool (``HFBackendConfig.model_ids``), with a hub
id or a local directory written by ``save_pretrained``.

Choices where the paper's model is not on the hub
-------------------------------------------------
- **Image Deblurring / Image Denoising** (paper: Restormer, GitHub-only weights):
  ``caidas/swin2SR-realworld-sr-x4-64-bsrgan-psnr``. It was trained on BSRGAN's real-world
  degradation model (random blur, Gaussian/Poisson noise, JPEG, downsampling), so it removes blur
  and noise as it super-resolves. The tool runs it at x4 and then area-downsamples by 4 back to the
  input size: a restored image of the input's shape. Both tools share the one checkpoint, so the
  model cache holds it once. (The hub has no Swin2SR/SwinIR denoising or deblurring checkpoint
  with a ``transformers`` class; ``caidas/swin2SR-compressed-sr-x4-48`` removes JPEG artefacts
  only.)
- **Colorization** (paper: Zhang et al. SIGGRAPH'17, not on the hub): no colorization model on the
  hub has a ``transformers`` class. The default is ``timbrooks/instruct-pix2pix`` through
  ``diffusers`` (an optional extra, as for Text to Image Generation), prompted to colourise, with
  the input's luminance kept: the output is the input's CIE-Lab L channel with the a/b (chroma)
  channels of the edited image. Keeping L makes it a colorization (structure and brightness are
  the input's) rather than a free edit.
- **Object Detection**: ``facebook/detr-resnet-101`` as in the paper. Its config asks for a
  ``timm`` ResNet backbone, so the real checkpoint needs ``pip install timm``; any DETR-family
  checkpoint with a ``transformers`` backbone (or YOLOS) can replace it.
- **Sentiment Analysis / VQA / Fill Mask** follow the released code rather than the paper's text
  (FinBERT, GIT-textvqa and distilroberta): the reference table lists the models the code ran.
- **Metrics**: BERTScore with ``microsoft/deberta-xlarge-mnli`` (layer 40, no baseline rescaling,
  as bert-score's default for it); ViT score with ``google/vit-base-patch16-224`` (CLS embedding);
  CLIP score with ``openai/clip-vit-base-patch16``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from envs.openagi.tools import SPECS

TRANSFORMERS = "transformers"
DIFFUSERS = "diffusers"

FLOAT32, FLOAT16, BFLOAT16 = "float32", "float16", "bfloat16"
BOTH_HALVES = (BFLOAT16, FLOAT16)

# Loader kinds: how a checkpoint is loaded and which (pre/post)processor goes with it.
IMAGE_CLASSIFICATION = "image-classification"
OBJECT_DETECTION = "object-detection"
IMAGE_TO_IMAGE = "image-to-image"
IMAGE_TO_TEXT = "image-to-text"
TEXT_TO_IMAGE = "text-to-image"
IMAGE_EDITING = "image-editing"
TEXT_CLASSIFICATION = "text-classification"
QUESTION_ANSWERING = "question-answering"
SEQ2SEQ = "seq2seq"
CAUSAL_LM = "causal-lm"
VISUAL_QA = "visual-question-answering"
FILL_MASK = "fill-mask"
TEXT_ENCODER = "text-encoder"
IMAGE_ENCODER = "image-encoder"
CLIP = "clip"

KINDS = (
    IMAGE_CLASSIFICATION, OBJECT_DETECTION, IMAGE_TO_IMAGE, IMAGE_TO_TEXT, TEXT_TO_IMAGE,
    IMAGE_EDITING, TEXT_CLASSIFICATION, QUESTION_ANSWERING, SEQ2SEQ, CAUSAL_LM, VISUAL_QA,
    FILL_MASK, TEXT_ENCODER, IMAGE_ENCODER, CLIP,
)


@dataclass(frozen=True)
class ExpertModel:
    """One row of the model table.

    ``half`` lists the half-precision dtypes the model is safe in (T5 overflows in float16;
    the small Swin2SR restorers regress pixels, where bfloat16's 8-bit mantissa shows, and cost
    nothing in float32). ``generate`` holds default generation / diffusion keyword arguments;
    ``options`` holds tool-specific settings read by the expert (documented in ``experts``).
    """

    name: str
    model_id: str
    kind: str
    library: str = TRANSFORMERS
    half: tuple[str, ...] = BOTH_HALVES
    batch_size: int | None = None
    generate: Mapping[str, Any] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)
    note: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"model {self.name!r}: unknown loader kind {self.kind!r}; expected one of {KINDS}")
        if self.library not in (TRANSFORMERS, DIFFUSERS):
            raise ValueError(f"model {self.name!r}: library {self.library!r}; expected transformers or diffusers")
        object.__setattr__(self, "generate", MappingProxyType(dict(self.generate)))
        object.__setattr__(self, "options", MappingProxyType(dict(self.options)))


_RESTORE = dict(kind=IMAGE_TO_IMAGE, half=(), batch_size=4)
_REALWORLD_X4 = "caidas/swin2SR-realworld-sr-x4-64-bsrgan-psnr"

DEFAULT_EXPERTS: Mapping[str, ExpertModel] = MappingProxyType({
    m.name: m
    for m in (
        ExpertModel("Image Classification", "google/vit-base-patch16-224", IMAGE_CLASSIFICATION),
        ExpertModel(
            "Colorization", "timbrooks/instruct-pix2pix", IMAGE_EDITING, DIFFUSERS, half=BOTH_HALVES,
            batch_size=4,
            generate={"num_inference_steps": 20, "image_guidance_scale": 1.5, "guidance_scale": 7.0},
            options={"prompt": "colorize this black and white photo, natural colors", "keep_luminance": True},
            note="no hub colorization model has a transformers class; InstructPix2Pix + input luminance",
        ),
        ExpertModel(
            "Object Detection", "facebook/detr-resnet-101", OBJECT_DETECTION,
            options={"threshold": 0.9}, note="needs timm for its backbone",
        ),
        ExpertModel("Image Super Resolution", "caidas/swin2SR-classical-sr-x2-64", **_RESTORE),
        ExpertModel(
            "Image Captioning", "nlpconnect/vit-gpt2-image-captioning", IMAGE_TO_TEXT,
            generate={"max_new_tokens": 16, "num_beams": 4},
        ),
        ExpertModel(
            "Text to Image Generation", "CompVis/stable-diffusion-v1-4", TEXT_TO_IMAGE, DIFFUSERS,
            batch_size=4, generate={"num_inference_steps": 50, "guidance_scale": 7.5},
        ),
        ExpertModel(
            "Sentiment Analysis", "distilbert-base-uncased-finetuned-sst-2-english", TEXT_CLASSIFICATION
        ),
        ExpertModel(
            "Question Answering", "distilbert-base-cased-distilled-squad", QUESTION_ANSWERING,
            options={"max_length": 384, "stride": 128, "max_answer_tokens": 30, "max_question_tokens": 64},
        ),
        ExpertModel("Text Summarization", "facebook/bart-large-cnn", SEQ2SEQ, options={"task": "summarization"}),
        ExpertModel(
            "Text Generation", "gpt2", CAUSAL_LM,
            generate={"max_new_tokens": 40, "do_sample": False, "no_repeat_ngram_size": 3},
            options={"return_full_text": True},
        ),
        ExpertModel("Visual Question Answering", "dandelin/vilt-b32-finetuned-vqa", VISUAL_QA),
        ExpertModel(
            "Image Deblurring", _REALWORLD_X4, **_RESTORE, options={"restore_input_size": True},
            note="Restormer is not on the hub; real-world (BSRGAN-degradation) Swin2SR x4, then /4",
        ),
        ExpertModel(
            "Image Denoising", _REALWORLD_X4, **_RESTORE, options={"restore_input_size": True},
            note="Restormer is not on the hub; real-world (BSRGAN-degradation) Swin2SR x4, then /4",
        ),
        ExpertModel(
            "Machine Translation", "t5-base", SEQ2SEQ, half=(BFLOAT16,),
            generate={"max_new_tokens": 128, "num_beams": 4},
            options={"task": "translation_en_to_de"}, note="T5 overflows in float16",
        ),
        ExpertModel("Fill Mask", "distilbert-base-uncased", FILL_MASK),
    )
})

BERTSCORE, VIT_SCORE, CLIP_SCORE = "bertscore", "vit", "clip"
METRICS = (BERTSCORE, VIT_SCORE, CLIP_SCORE)

DEFAULT_METRIC_MODELS: Mapping[str, ExpertModel] = MappingProxyType({
    BERTSCORE: ExpertModel(BERTSCORE, "microsoft/deberta-xlarge-mnli", TEXT_ENCODER, half=(BFLOAT16,)),
    VIT_SCORE: ExpertModel(VIT_SCORE, "google/vit-base-patch16-224", IMAGE_ENCODER),
    CLIP_SCORE: ExpertModel(CLIP_SCORE, "openai/clip-vit-base-patch16", CLIP),
})

# bert-score's default layer per model (its ``model2layers`` table, for the models one would use).
BERTSCORE_LAYERS: Mapping[str, int] = MappingProxyType({
    "microsoft/deberta-xlarge-mnli": 40,
    "microsoft/deberta-large-mnli": 18,
    "roberta-large": 17,
    "FacebookAI/roberta-large": 17,
    "roberta-base": 10,
    "bert-base-uncased": 9,
    "distilbert-base-uncased": 5,
})

assert set(DEFAULT_EXPERTS) == set(SPECS), "the model table must cover exactly the 15 OpenAGI tools"
