"""Architectures the other tests do not name, each from a tiny config (random weights, nothing downloaded), with
what the explorer should find on it: its attention, the embedding of its token ids, an output embedding, and the
attention module whose heads can be ablated (or the refusal each one gets).

Every builder seeds torch and returns the model in eval mode on its default attention implementation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from tests import transformer_models as tm

transformers = tm.transformers

WIDTH, HEADS, LAYERS, VOCAB = 32, 4, 2, tm.VOCAB
HEAD_DIM = WIDTH // HEADS


@dataclass(frozen=True)
class Arch:
    """One architecture and what each feature should give on it.

    ``attentions`` reads the attention probabilities the model returns with ``output_attentions=True`` under eager
    attention, in execution order (None: it has no attention, and ``attention()`` refuses). ``embedding`` is the
    nn.Embedding of the input ids (None: token attributions refuse, ``token_refusal`` says how). ``lens``: the model
    declares an output embedding. ``heads`` is the attention module whose heads are ablated, ``projection`` the
    module whose input is their context (``"mha"``: an nn.MultiheadAttention; None: ``ablate_heads`` refuses, with
    ``heads_refusal``). ``probe`` is a block hooked for ``code()``.
    """

    name: str
    build: Callable[[], nn.Module]
    inputs: Callable[[], Any]
    description: str
    probe: str
    heads: str
    projection: str | None
    attentions: Callable[[Any], list[torch.Tensor]] | None = None
    embedding: str | None = None
    lens: bool = False
    token_refusal: str = "integrated_gradients attributes input tokens: it needs integer token ids"
    heads_refusal: str = "no output projection found"

    def __repr__(self) -> str:
        return self.name


def _seeded(build: Callable[[], nn.Module]) -> Callable[[], nn.Module]:
    def seeded() -> nn.Module:
        torch.manual_seed(0)
        return build().eval()

    return seeded


def _ids() -> dict[str, torch.Tensor]:
    ids = tm.token_ids(2, 6)
    mask = torch.ones_like(ids)
    mask[1, :2] = 0  # left padding on the second item: the mask must reach every run
    return {"input_ids": ids, "attention_mask": mask}


def _seq2seq() -> dict[str, torch.Tensor]:
    return {"input_ids": tm.token_ids(2, 6), "decoder_input_ids": tm.token_ids(2, 4, seed=5)}


def _pixels() -> dict[str, torch.Tensor]:
    return {"pixel_values": tm.images(2)}


def _audio() -> dict[str, torch.Tensor]:
    return {"input_values": torch.randn(2, 400, generator=torch.Generator().manual_seed(3))}


def _text_and_image() -> dict[str, torch.Tensor]:
    return {"input_ids": tm.token_ids(3, 6), "pixel_values": tm.images(2)}


def _returned(output: Any) -> list[torch.Tensor]:
    return list(output.attentions)


def _encoder_decoder(output: Any) -> list[torch.Tensor]:
    """Encoder layers, then each decoder layer's self- and cross-attention: the order they run in."""
    decoder = [t for pair in zip(output.decoder_attentions, output.cross_attentions, strict=True) for t in pair]
    return [*output.encoder_attentions, *decoder]


def _two_towers(output: Any) -> list[torch.Tensor]:
    return [*output.vision_model_output.attentions, *output.text_model_output.attentions]


def _only_multihead(output: Any) -> list[torch.Tensor]:
    """None returned: every probability comes from an nn.MultiheadAttention, asked for them per call."""
    return []


_DECODER = {
    "num_hidden_layers": LAYERS,
    "hidden_size": WIDTH,
    "intermediate_size": 2 * WIDTH,
    "num_attention_heads": HEADS,
    "vocab_size": VOCAB,
    "max_position_embeddings": 64,
}
_ENCODER = {**_DECODER, "num_labels": 3}
_VISION = {
    "num_hidden_layers": LAYERS,
    "hidden_size": WIDTH,
    "intermediate_size": 2 * WIDTH,
    "num_attention_heads": HEADS,
    "image_size": 32,
    "patch_size": 8,
}
_SEQ2SEQ = {
    "encoder_layers": LAYERS,
    "decoder_layers": LAYERS,
    "d_model": WIDTH,
    "encoder_attention_heads": HEADS,
    "decoder_attention_heads": HEADS,
    "encoder_ffn_dim": 2 * WIDTH,
    "decoder_ffn_dim": 2 * WIDTH,
    "vocab_size": VOCAB,
    "max_position_embeddings": 64,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "decoder_start_token_id": 1,
}
_SPEECH = {
    "num_hidden_layers": LAYERS,
    "hidden_size": WIDTH,
    "intermediate_size": 2 * WIDTH,
    "num_attention_heads": HEADS,
    "conv_dim": (16, 16),
    "conv_stride": (4, 4),
    "conv_kernel": (8, 4),
    "num_conv_pos_embeddings": 8,
    "num_conv_pos_embedding_groups": 2,
    "num_labels": 3,
    "classifier_proj_size": 16,
}


def _siglip() -> nn.Module:
    text = transformers.SiglipTextConfig(**_VISION | {"vocab_size": VOCAB, "max_position_embeddings": 16})
    vision = transformers.SiglipVisionConfig(**_VISION)
    return transformers.SiglipModel(
        transformers.SiglipConfig(text_config=text.to_dict(), vision_config=vision.to_dict())
    )


def _with_logits_bias(model: nn.Module) -> nn.Module:
    """The model with a random ``final_logits_bias``, as a trained Marian has (its converter loads the Marian
    model's output bias there; a new one starts at zeros)."""
    with torch.no_grad():
        model.final_logits_bias.normal_()
    return model


class TranslationTransformer(nn.Module):
    """``nn.Transformer`` between two token embeddings, with a causal target mask and a vocabulary head."""

    def __init__(self) -> None:
        super().__init__()
        self.source = nn.Embedding(VOCAB, WIDTH)
        self.target = nn.Embedding(VOCAB, WIDTH)
        self.transformer = nn.Transformer(WIDTH, HEADS, LAYERS, LAYERS, 2 * WIDTH, dropout=0.0, batch_first=True)
        self.head = nn.Linear(WIDTH, VOCAB)

    def forward(self, source: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        mask = nn.Transformer.generate_square_subsequent_mask(target.shape[1])
        return self.head(self.transformer(self.source(source), self.target(target), tgt_mask=mask))


def _decoder(name: str, build: Callable[[], nn.Module], blocks: str, attention: str, embedding: str, **more) -> Arch:
    """A decoder-only language model: each item's top next token, the lens, the heads of its first block's
    ``attention`` (``attention.projection``), the second block hooked for code()."""
    fields = {"probe": f"{blocks}.1", "attentions": _returned, "embedding": embedding, "lens": True}
    fields.update(heads=f"{blocks}.0.{attention.rsplit('.', 1)[0]}", projection=f"{blocks}.0.{attention}")
    return Arch(name, _seeded(build), _ids, "output.logits[:, -1] · top next token", **(fields | more))


def _classifier(name: str, build: Callable[[], nn.Module], inputs: Callable[[], Any], **more) -> Arch:
    """A classifier of text, images or audio: each item's top class, read from its pooled logits."""
    return Arch(name, _seeded(build), inputs, "output.logits · top class", **({"attentions": _returned} | more))


def _translation(name: str, build: Callable[[], nn.Module], stack: str, attention: str, **more) -> Arch:
    """An encoder-decoder language model: the top next token at the last decoder position, the encoder's tokens
    attributed, the decoder's blocks in the lens."""
    fields = {"attentions": _encoder_decoder, "embedding": f"{stack}encoder.embed_tokens", "lens": True}
    fields.update(heads=attention.rsplit(".", 1)[0], projection=attention)
    return Arch(
        name,
        _seeded(build),
        _seq2seq,
        "output.logits[:, -1] (decoder position -1 of 4) · top next token",
        **(fields | more),
    )


T = transformers
ARCHS: list[Arch] = [
    # decoder-only language models
    _decoder(
        "mistral",  # grouped-query attention
        lambda: T.MistralForCausalLM(T.MistralConfig(**_DECODER, num_key_value_heads=2)),
        "model.layers",
        "self_attn.o_proj",
        "model.embed_tokens",
    ),
    _decoder(
        "qwen2",  # biases on the query, key and value projections
        lambda: T.Qwen2ForCausalLM(T.Qwen2Config(**_DECODER, num_key_value_heads=2)),
        "model.layers",
        "self_attn.o_proj",
        "model.embed_tokens",
    ),
    _decoder(
        "gemma",  # one key-value head (multi-query), embeddings scaled by √width
        lambda: T.GemmaForCausalLM(T.GemmaConfig(**_DECODER, num_key_value_heads=1, head_dim=HEAD_DIM)),
        "model.layers",
        "self_attn.o_proj",
        "model.embed_tokens",
        probe="model.layers.0",
    ),
    _decoder(
        "phi",  # partial rotary, attention and MLP in parallel, the projection named dense
        lambda: T.PhiForCausalLM(T.PhiConfig(**_DECODER)),
        "model.layers",
        "self_attn.dense",
        "model.embed_tokens",
    ),
    _decoder(
        "gpt_neox",  # a fused query_key_value, an untied embed_out
        lambda: T.GPTNeoXForCausalLM(T.GPTNeoXConfig(**_DECODER)),
        "gpt_neox.layers",
        "attention.dense",
        "gpt_neox.embed_in",
    ),
    _decoder(
        "gptj",
        lambda: T.GPTJForCausalLM(
            T.GPTJConfig(
                n_layer=LAYERS,
                n_embd=WIDTH,
                n_head=HEADS,
                vocab_size=VOCAB,
                n_positions=64,
                rotary_dim=4,
                bos_token_id=1,
                eos_token_id=2,
            )
        ),
        "transformer.h",
        "attn.out_proj",
        "transformer.wte",
        probe="transformer.h.0",
    ),
    _decoder(
        "mpt",  # ALiBi, a fused Wqkv, eager attention only
        lambda: T.MptForCausalLM(T.MptConfig(n_layers=LAYERS, d_model=WIDTH, n_heads=HEADS, vocab_size=VOCAB)),
        "transformer.blocks",
        "attn.out_proj",
        "transformer.wte",
    ),
    # mixtures of experts: the probe is the routed block
    _decoder(
        "mixtral",
        lambda: T.MixtralForCausalLM(
            T.MixtralConfig(**_DECODER, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2)
        ),
        "model.layers",
        "self_attn.o_proj",
        "model.embed_tokens",
        probe="model.layers.1.mlp",
    ),
    _decoder(
        "qwen2_moe",  # routed experts beside a gated shared expert
        lambda: T.Qwen2MoeForCausalLM(
            T.Qwen2MoeConfig(
                **_DECODER,
                num_key_value_heads=2,
                num_experts=4,
                num_experts_per_tok=2,
                moe_intermediate_size=WIDTH,
                shared_expert_intermediate_size=WIDTH,
            )
        ),
        "model.layers",
        "self_attn.o_proj",
        "model.embed_tokens",
        probe="model.layers.0.mlp",
    ),
    # a state-space model: no attention, no heads (its mixer has an out_proj, but no head count)
    _decoder(
        "mamba",
        lambda: T.MambaForCausalLM(
            T.MambaConfig(
                num_hidden_layers=LAYERS,
                hidden_size=WIDTH,
                state_size=4,
                vocab_size=VOCAB,
                expand=2,
                conv_kernel=2,
                use_mambapy=False,
            )
        ),
        "backbone.layers",
        "mixer.out_proj",
        "backbone.embeddings",
        attentions=None,
        projection=None,
        heads_refusal="no head count found",
    ),
    # encoders
    _classifier(
        "roberta",  # positions counted from the padding id
        lambda: T.RobertaForSequenceClassification(T.RobertaConfig(**_ENCODER, pad_token_id=1)),
        _ids,
        probe="roberta.encoder.layer.1",
        heads="roberta.encoder.layer.0.attention.self",  # projected by its sibling output.dense
        projection="roberta.encoder.layer.0.attention.output.dense",
        embedding="roberta.embeddings.word_embeddings",
    ),
    _classifier(
        "electra",  # embeddings narrower than the hidden size, projected up
        lambda: T.ElectraForSequenceClassification(T.ElectraConfig(**_ENCODER, embedding_size=16)),
        _ids,
        probe="electra.encoder.layer.0",
        heads="electra.encoder.layer.1.attention",
        projection="electra.encoder.layer.1.attention.output.dense",
        embedding="electra.embeddings.word_embeddings",
    ),
    _classifier(
        "albert",  # one layer shared by every depth: its modules run twice a forward
        lambda: T.AlbertForSequenceClassification(T.AlbertConfig(**_ENCODER, embedding_size=16)),
        _ids,
        probe="albert.encoder.albert_layer_groups.0.albert_layers.0.ffn",
        heads="albert.encoder.albert_layer_groups.0.albert_layers.0.attention",
        projection="albert.encoder.albert_layer_groups.0.albert_layers.0.attention.dense",
        embedding="albert.embeddings.word_embeddings",
    ),
    # vision: transformers, CNNs, a detector
    _classifier(
        "swin",  # windowed attention, relative position bias, patch merging; one attention returned per stage
        lambda: T.SwinForImageClassification(
            T.SwinConfig(
                image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 4], window_size=4, num_labels=5
            )
        ),
        _pixels,
        probe="swin.encoder.layers.1",
        heads="swin.encoder.layers.1.blocks.0.attention",
        projection="swin.encoder.layers.1.blocks.0.attention.o_proj",
    ),
    _classifier(
        "beit",  # relative position bias, layer scale
        lambda: T.BeitForImageClassification(T.BeitConfig(**_VISION, num_labels=5, use_relative_position_bias=True)),
        _pixels,
        probe="beit.layers.1",
        heads="beit.layers.0.attention",
        projection="beit.layers.0.attention.o_proj",
    ),
    _classifier(
        "convnext",
        lambda: T.ConvNextForImageClassification(
            T.ConvNextConfig(num_stages=2, hidden_sizes=[8, 16], depths=[1, 1], num_labels=5)
        ),
        _pixels,
        probe="convnext.encoder.stages.1",
        heads="convnext.encoder.stages.0",
        projection=None,
        attentions=None,
    ),
    _classifier(
        "resnet",
        lambda: T.ResNetForImageClassification(
            T.ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic", num_labels=5)
        ),
        _pixels,
        probe="resnet.encoder.stages.1",
        heads="resnet.encoder.stages.0",
        projection=None,
        attentions=None,
    ),
    Arch(
        "yolos",  # a ViT detector: detection tokens after the patches, class logits per detection token
        _seeded(
            lambda: T.YolosForObjectDetection(
                T.YolosConfig(**_VISION | {"image_size": [32, 32]}, num_detection_tokens=4, num_labels=5)
            )
        ),
        _pixels,
        "output.logits[:, -1] · top label",
        probe="vit.encoder.layer.1",
        heads="vit.encoder.layer.0.attention",
        projection="vit.encoder.layer.0.attention.output.dense",
        attentions=_returned,
    ),
    # speech
    _classifier(
        "wav2vec2",  # a convolutional feature encoder before the transformer, forward hooks of its own
        lambda: T.Wav2Vec2ForSequenceClassification(T.Wav2Vec2Config(**_SPEECH)),
        _audio,
        probe="wav2vec2.encoder.layers.1",
        heads="wav2vec2.encoder.layers.0.attention",
        projection="wav2vec2.encoder.layers.0.attention.out_proj",
    ),
    # encoder-decoders
    _translation(
        "bart",  # heads of a cross-attention
        lambda: T.BartForConditionalGeneration(T.BartConfig(**_SEQ2SEQ)),
        "model.",
        "model.decoder.layers.1.encoder_attn.out_proj",
        probe="model.decoder.layers.0",
    ),
    _translation(
        "marian",  # sinusoidal positions, a final logits bias added after the unembedding
        lambda: _with_logits_bias(T.MarianMTModel(T.MarianConfig(**_SEQ2SEQ))),
        "model.",
        "model.encoder.layers.0.self_attn.out_proj",
        probe="model.encoder.layers.1",
    ),
    _translation(
        "mt5",  # relative attention buckets, gated feed-forward, untied head; the projection is named o
        lambda: T.MT5ForConditionalGeneration(
            T.MT5Config(
                num_layers=LAYERS,
                num_decoder_layers=LAYERS,
                d_model=WIDTH,
                d_kv=HEAD_DIM,
                d_ff=2 * WIDTH,
                num_heads=HEADS,
                vocab_size=VOCAB,
                decoder_start_token_id=0,
            )
        ),
        "",
        "encoder.block.0.layer.0.SelfAttention.o",
        probe="decoder.block.1",
    ),
    # two towers: two images and three texts
    Arch(
        "siglip",  # and a multihead-attention pooling head on the vision tower
        _seeded(_siglip),
        _text_and_image,
        "output.logits_per_image · top class",
        probe="text_model.encoder.layers.1",
        heads="vision_model.head.attention",
        projection="mha",
        attentions=_two_towers,
        token_refusal=r"the inputs hold an image \(N, C, H, W\) beside the token ids \(3, 6\)",
    ),
    # plain torch
    Arch(
        "nn_transformer",
        _seeded(TranslationTransformer),
        lambda: (tm.token_ids(2, 6), tm.token_ids(2, 4, seed=5)),
        "output[:, -1] · top next token",
        probe="transformer.decoder.layers.0",
        heads="transformer.encoder.layers.1.self_attn",
        projection="mha",
        attentions=_only_multihead,
    ),
]
