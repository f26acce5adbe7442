"""The OpenAGI tool vocabulary: the 15 expert names and their modalities.

Backends (the offline ``lite`` zoo, the ``hf`` models) register implementations under these
names, so plans, prompts and the constrained decoder are the same whichever backend runs them.
"""

from __future__ import annotations

from dataclasses import dataclass

from envs.openagi.registry import IMAGE, TEXT, ToolRegistry


@dataclass(frozen=True)
class ToolSpec:
    name: str
    inputs: tuple[str, ...]
    output: str
    description: str


OPENAGI_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec("Image Classification", (IMAGE,), TEXT, "predict the class label of an image"),
    ToolSpec("Colorization", (IMAGE,), IMAGE, "add colour to a grayscale image"),
    ToolSpec("Object Detection", (IMAGE,), TEXT, "list the names of the objects in an image"),
    ToolSpec("Image Super Resolution", (IMAGE,), IMAGE, "upscale a low-resolution image x2"),
    ToolSpec("Image Captioning", (IMAGE,), TEXT, "describe an image in a sentence"),
    ToolSpec("Text to Image Generation", (TEXT,), IMAGE, "generate an image from a text"),
    ToolSpec("Sentiment Analysis", (TEXT,), TEXT, "classify the sentiment of a text"),
    ToolSpec("Question Answering", (TEXT, TEXT), TEXT, "answer a query about a document"),
    ToolSpec("Text Summarization", (TEXT,), TEXT, "summarise a text"),
    ToolSpec("Text Generation", (TEXT,), TEXT, "continue a text"),
    ToolSpec("Visual Question Answering", (IMAGE, TEXT), TEXT, "answer a query about an image"),
    ToolSpec("Image Deblurring", (IMAGE,), IMAGE, "remove blur from an image"),
    ToolSpec("Image Denoising", (IMAGE,), IMAGE, "remove noise from an image"),
    ToolSpec("Machine Translation", (TEXT,), TEXT, "translate English text to German"),
    ToolSpec("Fill Mask", (TEXT,), TEXT, "fill the masked word of a text"),
)
SPECS = {s.name: s for s in OPENAGI_TOOLS}


def _unimplemented(name: str):
    def fn(*batches):
        raise NotImplementedError(f"tool {name!r} has no implementation in this registry (signature only)")

    return fn


def signature_registry(names: tuple[str, ...] | None = None) -> ToolRegistry:
    """A registry of tool *signatures* only (calling a tool raises): for decoding and planning.

    The decoder only needs names and modalities; executing needs a backend's registry.
    """
    reg = ToolRegistry()
    for spec in OPENAGI_TOOLS:
        if names is None or spec.name in names:
            reg.register(spec.name, spec.inputs, spec.output, _unimplemented(spec.name), spec.description)
    return reg


def register_spec(registry: ToolRegistry, name: str, fn, **kw) -> None:
    """Register an implementation under an OpenAGI name, with the spec's modalities."""
    spec = SPECS[name]
    registry.register(spec.name, spec.inputs, spec.output, fn, spec.description, **kw)
