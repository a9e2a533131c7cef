"""Notebook code the browser tests and bench/frontend.py share: a word-level tokenizer and a small GPT-2 over it."""

WORD_TOKENIZER = """
import torch
import transformers
from tokenizers import Tokenizer, models, pre_tokenizers

words = "the cat sat on a mat and dog ran".split()
vocab = {"[PAD]": 0, "[UNK]": 1, **{w: i + 2 for i, w in enumerate(words)}}
raw = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
raw.pre_tokenizer = pre_tokenizers.Whitespace()
tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="[UNK]", pad_token="[PAD]")
"""
"""Defines ``words``, ``vocab`` and ``tokenizer`` (readable tokens, no download)."""


def gpt2(name: str, n_embd: int, n_head: int) -> str:
    """Code building ``name``, a 2-block GPT-2 of width ``n_embd`` and ``n_head`` heads over ``WORD_TOKENIZER``'s vocab
    (seeded, eval mode)."""
    return WORD_TOKENIZER + (
        "torch.manual_seed(0)\n"
        f"config = transformers.GPT2Config(n_layer=2, n_embd={n_embd}, n_head={n_head}, vocab_size=len(vocab), "
        "n_positions=64, bos_token_id=1, eos_token_id=1)\n"
        f"{name} = transformers.GPT2LMHeadModel(config).eval()\n"
    )
