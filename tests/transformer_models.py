"""Tiny transformers models built from configs (random weights, nothing downloaded), and a local tokenizer.

Each builder seeds torch, so two calls give equal weights; each returns the model in eval mode with its
default attention implementation (sdpa where transformers supports it), as a user's model comes.
"""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers", reason="transformers is a test dependency (make test installs it)")

VOCAB = 96
WORDS = ["the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "to", "it", "was", "big", "red", "hat", "sun"]


def _seeded(build, seed: int = 0):
    torch.manual_seed(seed)
    return build().eval()


def gpt2(layers: int = 2, width: int = 32, heads: int = 4, vocab: int = VOCAB):
    """A GPT-2 language model (``GPT2LMHeadModel``)."""
    config = transformers.GPT2Config(
        n_layer=layers, n_embd=width, n_head=heads, vocab_size=vocab, n_positions=128, bos_token_id=1, eos_token_id=2
    )
    return _seeded(lambda: transformers.GPT2LMHeadModel(config))


def llama(layers: int = 2, width: int = 32, heads: int = 4, vocab: int = VOCAB):
    """A Llama language model with grouped-query attention (``LlamaForCausalLM``)."""
    config = transformers.LlamaConfig(
        num_hidden_layers=layers,
        hidden_size=width,
        intermediate_size=2 * width,
        num_attention_heads=heads,
        num_key_value_heads=max(1, heads // 2),
        vocab_size=vocab,
        max_position_embeddings=128,
    )
    return _seeded(lambda: transformers.LlamaForCausalLM(config))


def _bert_config(layers: int, width: int, heads: int, vocab: int, labels: int):
    return transformers.BertConfig(
        num_hidden_layers=layers,
        hidden_size=width,
        intermediate_size=2 * width,
        num_attention_heads=heads,
        vocab_size=vocab,
        max_position_embeddings=128,
        num_labels=labels,
    )


def bert(layers: int = 2, width: int = 32, heads: int = 4, vocab: int = VOCAB, labels: int = 3):
    """A BERT sequence classifier (``BertForSequenceClassification``)."""
    config = _bert_config(layers, width, heads, vocab, labels)
    return _seeded(lambda: transformers.BertForSequenceClassification(config))


def bert_tokens(layers: int = 2, width: int = 32, heads: int = 4, vocab: int = VOCAB, labels: int = 5):
    """A BERT token classifier (``BertForTokenClassification``): one score per token and label."""
    config = _bert_config(layers, width, heads, vocab, labels)
    return _seeded(lambda: transformers.BertForTokenClassification(config))


def t5(layers: int = 2, width: int = 32, heads: int = 4, vocab: int = VOCAB):
    """A T5 encoder-decoder (``T5ForConditionalGeneration``)."""
    config = transformers.T5Config(
        num_layers=layers,
        num_decoder_layers=layers,
        d_model=width,
        d_kv=width // heads,
        d_ff=2 * width,
        num_heads=heads,
        vocab_size=vocab,
        decoder_start_token_id=0,
    )
    return _seeded(lambda: transformers.T5ForConditionalGeneration(config))


def whisper(layers: int = 2, width: int = 32, heads: int = 4, vocab: int = VOCAB, mels: int = 16):
    """A Whisper speech encoder-decoder (``WhisperForConditionalGeneration``); inputs ``(N, mels, 2·frames)``."""
    config = transformers.WhisperConfig(
        encoder_layers=layers,
        decoder_layers=layers,
        d_model=width,
        encoder_attention_heads=heads,
        decoder_attention_heads=heads,
        encoder_ffn_dim=2 * width,
        decoder_ffn_dim=2 * width,
        vocab_size=vocab,
        num_mel_bins=mels,
        max_source_positions=16,
        max_target_positions=32,
        decoder_start_token_id=1,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    return _seeded(lambda: transformers.WhisperForConditionalGeneration(config))


def vit(layers: int = 2, width: int = 32, heads: int = 4, image: int = 32, patch: int = 8, labels: int = 10):
    """A ViT image classifier (``ViTForImageClassification``): ``(image/patch)²`` patch tokens and a class token."""
    config = transformers.ViTConfig(
        num_hidden_layers=layers,
        hidden_size=width,
        intermediate_size=2 * width,
        num_attention_heads=heads,
        image_size=image,
        patch_size=patch,
        num_labels=labels,
    )
    return _seeded(lambda: transformers.ViTForImageClassification(config))


def clip(layers: int = 2, width: int = 32, heads: int = 4, image: int = 32, patch: int = 8, vocab: int = VOCAB):
    """A CLIP image-text model (``CLIPModel``): a vision tower and a text tower."""
    text = transformers.CLIPTextConfig(
        num_hidden_layers=layers,
        hidden_size=width,
        intermediate_size=2 * width,
        num_attention_heads=heads,
        vocab_size=vocab,
        max_position_embeddings=32,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    vision = transformers.CLIPVisionConfig(
        num_hidden_layers=layers,
        hidden_size=width,
        intermediate_size=2 * width,
        num_attention_heads=heads,
        image_size=image,
        patch_size=patch,
    )
    config = transformers.CLIPConfig(text_config=text.to_dict(), vision_config=vision.to_dict(), projection_dim=16)
    return _seeded(lambda: transformers.CLIPModel(config))


def token_ids(batch: int = 1, length: int = 8, vocab: int = VOCAB, seed: int = 1) -> torch.Tensor:
    """Random token ids ``(batch, length)`` below ``vocab``, avoiding the ids 0–2 that models treat as special."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(3, vocab, (batch, length), generator=generator)


def images(batch: int = 1, size: int = 32, channels: int = 3, seed: int = 2) -> torch.Tensor:
    """Random images ``(batch, channels, size, size)``."""
    return torch.randn(batch, channels, size, size, generator=torch.Generator().manual_seed(seed))


def tokenizer():
    """A word-level ``PreTrainedTokenizerFast`` over ``WORDS`` (ids 0–3 special), built locally."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[PAD]": 0, "[UNK]": 1, "[BOS]": 2, "[EOS]": 3, **{w: i + 4 for i, w in enumerate(WORDS)}}
    raw = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=raw, unk_token="[UNK]", pad_token="[PAD]", bos_token="[BOS]", eos_token="[EOS]"
    )
