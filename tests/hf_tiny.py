"""Tiny random checkpoints of every architecture the `hf` backend runs, built offline.

Each builder makes a model from a config (random, seeded weights) with a local tokenizer and/or
image processor, and ``save_pretrained``s them into a directory the backend then loads exactly
as it would load a hub id. Outputs are meaningless; the loading, preprocessing, batching,
generation and postprocessing code paths are the real ones.

Tokenizers are built from explicit vocabularies (no training, no download): WordPiece over
characters plus a few whole words (BERT / DistilBERT / ViLT), byte-level BPE with no merges
(GPT-2, BART, CLIP: every byte is a token), and a Unigram vocabulary (T5).
"""

from __future__ import annotations

import string
from collections.abc import Callable
from pathlib import Path

import torch
import transformers as tf
from tokenizers.pre_tokenizers import ByteLevel

WORDS = (
    "the a an of and in on is are was what which who where how many there this that it with "
    "cat dog bird person car bear grass photo image picture text big small red green blue black "
    "white color sits field player jersey number question answer document english german good bad"
).split()
_BYTES = sorted(ByteLevel.alphabet())
_SMALL_IMAGE = 32


def _seeded(seed: int = 0) -> None:
    torch.manual_seed(seed)


# -------------------------------------------------------------------------------- tokenizers


def bert_tokenizer(cased: bool = False, max_length: int = 128) -> tf.BertTokenizer:
    chars = list(string.ascii_lowercase + (string.ascii_uppercase if cased else "") + string.digits
                 + string.punctuation)
    words = [w.capitalize() for w in WORDS] + WORDS if cased else WORDS
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *chars, *("##" + c for c in chars), *words]
    return tf.BertTokenizer(vocab={t: i for i, t in enumerate(dict.fromkeys(vocab))}, do_lower_case=not cased,
                            model_max_length=max_length)


def gpt2_tokenizer(max_length: int = 128) -> tf.GPT2Tokenizer:
    vocab = {c: i for i, c in enumerate(_BYTES)}
    vocab["<|endoftext|>"] = len(vocab)
    return tf.GPT2Tokenizer(vocab=vocab, merges=[], model_max_length=max_length)


def bart_tokenizer(max_length: int = 128) -> tf.BartTokenizer:
    vocab = {t: i for i, t in enumerate(["<s>", "<pad>", "</s>", "<unk>", *_BYTES, "<mask>"])}
    return tf.BartTokenizer(vocab=vocab, merges=[], model_max_length=max_length)


def t5_tokenizer(max_length: int = 128) -> tf.T5Tokenizer:
    chars = string.ascii_letters + string.digits + string.punctuation
    pieces = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("\u2581", -2.0)]
    pieces += [(c, -3.0) for c in chars] + [("\u2581" + w, -1.0) for w in WORDS]
    return tf.T5Tokenizer(vocab=pieces, extra_ids=0, model_max_length=max_length)


def clip_tokenizer() -> tf.CLIPTokenizer:
    vocab = {c: i for i, c in enumerate(_BYTES)}
    for c in _BYTES:
        vocab[c + "</w>"] = len(vocab)
    vocab["<|startoftext|>"] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    return tf.CLIPTokenizer(vocab=vocab, merges=[], model_max_length=77)


def _vit_config(**kw) -> tf.ViTConfig:
    return tf.ViTConfig(image_size=_SMALL_IMAGE, patch_size=8, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64, **kw)


def _vit_processor() -> tf.ViTImageProcessor:
    return tf.ViTImageProcessor(size={"height": _SMALL_IMAGE, "width": _SMALL_IMAGE})


# ---------------------------------------------------------------------------- tool builders


def build_image_classifier(path: Path) -> Path:
    _seeded()
    labels = ["tabby, tabby cat", "golden retriever", "Egyptian cat", "goldfish, Carassius auratus"]
    model = tf.ViTForImageClassification(_vit_config(id2label=dict(enumerate(labels)),
                                                     label2id={v: k for k, v in enumerate(labels)}))
    model.save_pretrained(path)
    _vit_processor().save_pretrained(path)
    return path


def build_detector(path: Path) -> Path:
    """DETR with a transformers ResNet backbone (no timm here), COCO-style labels with an N/A."""
    _seeded()
    labels = ["N/A", "person", "dog", "cat"]
    backbone = tf.ResNetConfig(num_channels=3, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1],
                               out_features=["stage2"])
    config = tf.DetrConfig(backbone_config=backbone, use_timm_backbone=False, d_model=32, encoder_layers=1,
                           decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
                           encoder_ffn_dim=32, decoder_ffn_dim=32, num_queries=6,
                           id2label=dict(enumerate(labels)), label2id={v: k for k, v in enumerate(labels)})
    model = tf.DetrForObjectDetection(config)
    with torch.no_grad():  # distinct queries and a classifier that is not all "no object"/N/A
        model.model.query_position_embeddings.weight.normal_(0.0, 1.0)
        model.class_labels_classifier.weight.normal_(0.0, 0.3)
        model.class_labels_classifier.bias.copy_(torch.tensor([-2.0, 1.0, 1.0, 1.0, -4.0]))
    model.save_pretrained(path)
    tf.DetrImageProcessor(size={"shortest_edge": _SMALL_IMAGE, "longest_edge": 64}).save_pretrained(path)
    return path


def build_swin2sr(path: Path, upscale: int) -> Path:
    """x2 'classical' (pixelshuffle) or x4 'real-world' (nearest+conv) Swin2SR."""
    _seeded()
    config = tf.Swin2SRConfig(image_size=16, patch_size=1, embed_dim=8, depths=[1], num_heads=[1], window_size=4,
                              mlp_ratio=2.0, upscale=upscale,
                              upsampler="pixelshuffle" if upscale == 2 else "nearest+conv")
    tf.Swin2SRForImageSuperResolution(config).save_pretrained(path)
    tf.Swin2SRImageProcessor().save_pretrained(path)
    return path


def build_captioner(path: Path) -> Path:
    """VisionEncoderDecoder: a ViT encoder and a GPT-2 decoder with cross-attention."""
    _seeded()
    tok = gpt2_tokenizer()
    eos = tok.convert_tokens_to_ids("<|endoftext|>")
    decoder = tf.GPT2Config(vocab_size=len(tok), n_positions=64, n_embd=32, n_layer=1, n_head=2,
                            bos_token_id=eos, eos_token_id=eos, add_cross_attention=True, is_decoder=True)
    config = tf.VisionEncoderDecoderConfig.from_encoder_decoder_configs(_vit_config(), decoder)
    config.decoder_start_token_id = config.pad_token_id = config.eos_token_id = eos
    model = tf.VisionEncoderDecoderModel(config=config)
    model.generation_config = tf.GenerationConfig(decoder_start_token_id=eos, bos_token_id=eos, eos_token_id=eos,
                                                  pad_token_id=eos)
    model.save_pretrained(path)
    _vit_processor().save_pretrained(path)
    tok.save_pretrained(path)
    return path


def _distilbert(tok: tf.PreTrainedTokenizerBase, **kw) -> tf.DistilBertConfig:
    return tf.DistilBertConfig(vocab_size=len(tok), dim=32, n_layers=2, n_heads=2, hidden_dim=64,
                               max_position_embeddings=128, pad_token_id=tok.pad_token_id, **kw)


def build_sentiment(path: Path) -> Path:
    _seeded()
    tok = bert_tokenizer()
    labels = {0: "NEGATIVE", 1: "POSITIVE"}
    tf.DistilBertForSequenceClassification(
        _distilbert(tok, id2label=labels, label2id={v: k for k, v in labels.items()})
    ).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def build_qa(path: Path) -> Path:
    _seeded()
    tok = bert_tokenizer(cased=True)
    tf.DistilBertForQuestionAnswering(_distilbert(tok)).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def build_fill_mask(path: Path) -> Path:
    _seeded()
    tok = bert_tokenizer()
    tf.DistilBertForMaskedLM(_distilbert(tok)).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def build_bart(path: Path) -> Path:
    _seeded()
    tok = bart_tokenizer()
    config = tf.BartConfig(vocab_size=len(tok), d_model=32, encoder_layers=1, decoder_layers=1,
                           encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
                           decoder_ffn_dim=32, max_position_embeddings=128, bos_token_id=0, pad_token_id=1,
                           eos_token_id=2, decoder_start_token_id=2, forced_bos_token_id=0)
    model = tf.BartForConditionalGeneration(config)
    model.generation_config = tf.GenerationConfig(bos_token_id=0, pad_token_id=1, eos_token_id=2,
                                                  decoder_start_token_id=2, forced_bos_token_id=0)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def build_gpt2(path: Path) -> Path:
    _seeded()
    tok = gpt2_tokenizer()
    eos = tok.convert_tokens_to_ids("<|endoftext|>")
    tf.GPT2LMHeadModel(tf.GPT2Config(vocab_size=len(tok), n_positions=128, n_embd=32, n_layer=2, n_head=2,
                                     bos_token_id=eos, eos_token_id=eos)).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def build_vilt(path: Path) -> Path:
    _seeded()
    tok = bert_tokenizer(max_length=40)
    labels = {0: "yes", 1: "no", 2: "2", 3: "Red"}
    config = tf.ViltConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=64, image_size=_SMALL_IMAGE, patch_size=8, max_position_embeddings=40,
                           id2label=labels, label2id={v: k for k, v in labels.items()})
    tf.ViltForQuestionAnswering(config).save_pretrained(path)
    image_processor = tf.ViltImageProcessor(size={"shortest_edge": _SMALL_IMAGE, "longest_edge": 64}, size_divisor=8)
    tf.ViltProcessor(image_processor=image_processor, tokenizer=tok).save_pretrained(path)
    return path


def build_t5(path: Path) -> Path:
    _seeded()
    tok = t5_tokenizer()
    config = tf.T5Config(vocab_size=len(tok), d_model=32, d_kv=8, d_ff=64, num_layers=1, num_decoder_layers=1,
                         num_heads=2, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
    model = tf.T5ForConditionalGeneration(config)
    model.generation_config = tf.GenerationConfig(pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


# ------------------------------------------------------------------------------ metric models


def build_text_encoder(path: Path) -> Path:
    """A 3-layer BERT for BERTScore (the backend reads one of its hidden layers)."""
    _seeded()
    tok = bert_tokenizer()
    tf.BertModel(tf.BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=3, num_attention_heads=2,
                               intermediate_size=64, max_position_embeddings=128)).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def _clip_text_config(tok: tf.CLIPTokenizer, **kw) -> tf.CLIPTextConfig:
    return tf.CLIPTextConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                             num_attention_heads=2, max_position_embeddings=77,
                             bos_token_id=tok.convert_tokens_to_ids("<|startoftext|>"),
                             eos_token_id=tok.convert_tokens_to_ids("<|endoftext|>"),
                             pad_token_id=tok.convert_tokens_to_ids("<|endoftext|>"), **kw)


def build_clip(path: Path) -> Path:
    _seeded()
    tok = clip_tokenizer()
    vision = tf.CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                                 image_size=_SMALL_IMAGE, patch_size=8)
    config = tf.CLIPConfig(text_config=_clip_text_config(tok).to_dict(), vision_config=vision.to_dict(),
                           projection_dim=16)
    tf.CLIPModel(config).save_pretrained(path)
    image_processor = tf.CLIPImageProcessor(size={"shortest_edge": _SMALL_IMAGE},
                                            crop_size={"height": _SMALL_IMAGE, "width": _SMALL_IMAGE})
    tf.CLIPProcessor(image_processor=image_processor, tokenizer=tok).save_pretrained(path)
    return path


# ---------------------------------------------------------------------------- diffusers (opt.)


def _diffusion_parts(in_channels: int):
    import diffusers

    _seeded()
    tok = clip_tokenizer()
    text_encoder = tf.CLIPTextModel(_clip_text_config(tok))
    unet = diffusers.UNet2DConditionModel(
        block_out_channels=(8, 16), layers_per_block=1, sample_size=8, in_channels=in_channels, out_channels=4,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"), up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        cross_attention_dim=32, norm_num_groups=4, attention_head_dim=2,
    )
    vae = diffusers.AutoencoderKL(
        block_out_channels=[8, 16], in_channels=3, out_channels=3, latent_channels=4, norm_num_groups=4,
        down_block_types=["DownEncoderBlock2D"] * 2, up_block_types=["UpDecoderBlock2D"] * 2,
    )
    scheduler = diffusers.DDIMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                                        clip_sample=False, set_alpha_to_one=False, steps_offset=1)
    return dict(vae=vae, text_encoder=text_encoder, tokenizer=tok, unet=unet, scheduler=scheduler,
                safety_checker=None, feature_extractor=None, requires_safety_checker=False)


def build_stable_diffusion(path: Path) -> Path:
    import diffusers

    diffusers.StableDiffusionPipeline(**_diffusion_parts(in_channels=4)).save_pretrained(path)
    return path


def build_instruct_pix2pix(path: Path) -> Path:
    """InstructPix2Pix's UNet takes the noisy latents and the input image's latents (8 channels)."""
    import diffusers

    diffusers.StableDiffusionInstructPix2PixPipeline(**_diffusion_parts(in_channels=8)).save_pretrained(path)
    return path


# --------------------------------------------------------------------------------- everything

TOOL_BUILDERS: dict[str, tuple[str, Callable[[Path], Path]]] = {
    "Image Classification": ("vit-classifier", build_image_classifier),
    "Object Detection": ("detr", build_detector),
    "Image Super Resolution": ("swin2sr-x2", lambda p: build_swin2sr(p, 2)),
    "Image Deblurring": ("swin2sr-x4", lambda p: build_swin2sr(p, 4)),
    "Image Denoising": ("swin2sr-x4", lambda p: build_swin2sr(p, 4)),
    "Image Captioning": ("vit-gpt2", build_captioner),
    "Sentiment Analysis": ("distilbert-sst2", build_sentiment),
    "Question Answering": ("distilbert-squad", build_qa),
    "Text Summarization": ("bart", build_bart),
    "Text Generation": ("gpt2", build_gpt2),
    "Visual Question Answering": ("vilt", build_vilt),
    "Machine Translation": ("t5", build_t5),
    "Fill Mask": ("distilbert-mlm", build_fill_mask),
    "Text to Image Generation": ("stable-diffusion", build_stable_diffusion),
    "Colorization": ("instruct-pix2pix", build_instruct_pix2pix),
}
METRIC_BUILDERS: dict[str, tuple[str, Callable[[Path], Path]]] = {
    "bertscore": ("bert", build_text_encoder),
    "vit": ("vit-classifier", build_image_classifier),
    "clip": ("clip", build_clip),
}
DIFFUSERS_TOOLS = ("Text to Image Generation", "Colorization")


def build_all(root: Path, with_diffusers: bool = True) -> tuple[dict[str, str], dict[str, str]]:
    """Build every tiny checkpoint under ``root``: (tool -> directory, metric -> directory).

    Shared directories (the x4 restorer, the ViT) are built once, like the shared hub ids.
    """
    built: dict[str, Path] = {}
    tools: dict[str, str] = {}
    metrics: dict[str, str] = {}
    for table, out in ((TOOL_BUILDERS, tools), (METRIC_BUILDERS, metrics)):
        for name, (dirname, build) in table.items():
            if name in DIFFUSERS_TOOLS and not with_diffusers:
                continue
            if dirname not in built:
                built[dirname] = build(root / dirname)
            out[name] = str(built[dirname])
    return tools, metrics
