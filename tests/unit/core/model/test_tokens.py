"""Token labels for the explorer: given as lists, or made by a tokenizer from the inputs' token ids."""

from __future__ import annotations

import pytest
import torch

from hookwidgets.core import Explorer
from tests import transformer_models as tm
from tests.conftest import SmallCNN

SENTENCE = "the cat sat on a mat"


def _encoded(*texts: str) -> dict[str, torch.Tensor]:
    return dict(tm.tokenizer()(list(texts), return_tensors="pt"))


def test_a_tokenizer_labels_a_gpt2_explorers_input_ids():
    inputs = _encoded(SENTENCE, "the dog ran to it big")
    with Explorer(tm.gpt2(), inputs, tokenizer=tm.tokenizer()) as ex:
        assert ex.tokens == [SENTENCE.split(), ["the", "dog", "ran", "to", "it", "big"]]
        assert ex.decoder_tokens is None
        assert ex.sequences.lengths == (6,)


def test_tokens_given_as_one_list_label_every_item_and_a_lone_id_tensor_is_checked_against_them():
    ids = tm.token_ids(batch=2, length=6)
    with Explorer(tm.gpt2(), ids, tokens=SENTENCE.split()) as ex:
        assert ex.tokens == [SENTENCE.split(), SENTENCE.split()]
    per_item = [list("abcdef"), list("ghijkl")]
    with Explorer(tm.bert(), {"input_ids": ids, "attention_mask": torch.ones_like(ids)}, tokens=per_item) as ex:
        assert ex.tokens == per_item


def test_a_tokenizer_on_bert_labels_ids_outside_its_vocabulary_by_number():
    ids = torch.tensor([[4, 5, 90]])  # 90: beyond the tokenizer's 20 words
    with Explorer(tm.bert(), {"input_ids": ids}, tokenizer=tm.tokenizer()) as ex:
        assert ex.tokens == [["the", "cat", "#90"]]


def test_an_encoder_decoder_gets_its_decoder_tokens_too():
    inputs = _encoded(SENTENCE)
    inputs["decoder_input_ids"] = _encoded("a big red hat")["input_ids"]
    with Explorer(tm.t5(), inputs, tokenizer=tm.tokenizer()) as ex:
        assert ex.tokens == [SENTENCE.split()]
        assert ex.decoder_tokens == [["a", "big", "red", "hat"]]
        assert ex.sequences.lengths == (6, 4)
        assert ex.sequences.labels(4) == ["a", "big", "red", "hat"]
        assert ex.sequences.labels(6, decoder=True) == SENTENCE.split()  # only the encoder's are that long


def test_a_vit_has_no_tokens_but_its_patch_grid_and_a_cnn_neither():
    with Explorer(tm.vit(), tm.images(2)) as ex:  # 32×32 images in 8×8 patches
        assert ex.tokens is None and ex.sequences.grid == (4, 4) and ex.sequences.lengths == (17,)
        assert ex.sequences.patch_tokens(17) == 1 and ex.sequences.patch_tokens(16) == 0
    with Explorer(SmallCNN(), torch.randn(2, 3, 8, 8)) as ex:
        assert ex.tokens is None and ex.sequences.grid is None and ex.sequences.lengths == ()


def test_a_vits_token_axis_reads_cls_then_each_patchs_row_and_column():
    with Explorer(tm.vit(), tm.images(2)) as ex:  # a 4×4 patch grid after the class token
        labels = ex.sequences.labels(17)
        assert labels is not None and len(labels) == 17
        assert labels[:3] == ["CLS", "0,0", "0,1"] and labels[5] == "1,0" and labels[-1] == "3,3"
        assert ex.sequences.labels(16) == [f"{r},{c}" for r in range(4) for c in range(4)]  # the patches alone
        assert ex.sequences.labels(5) is None  # not the grid's length
    with Explorer(SmallCNN(), torch.randn(2, 3, 8, 8)) as ex:
        assert ex.sequences.labels(17) is None


def test_tokens_of_the_wrong_length_or_number_say_both_counts():
    ids = tm.token_ids(batch=2, length=6)
    with pytest.raises(ValueError, match=r"tokens= for item 0 has 2 tokens but the input_ids have 6"):
        Explorer(tm.gpt2(), ids, tokens=["a", "b"])
    with pytest.raises(ValueError, match=r"tokens= for item 1 has 5 tokens but the input_ids have 6"):
        Explorer(tm.gpt2(), ids, tokens=[list("abcdef"), list("abcde")])
    with pytest.raises(ValueError, match=r"tokens= has 3 lists but the input_ids hold 2 items"):
        Explorer(tm.gpt2(), ids, tokens=[list("abcdef")] * 3)
    with pytest.raises(ValueError, match="pass tokens= or tokenizer=, not both"):
        Explorer(tm.gpt2(), ids, tokens=list("abcdef"), tokenizer=tm.tokenizer())
    with pytest.raises(TypeError, match="tokenizer= needs a convert_ids_to_tokens"):
        Explorer(tm.gpt2(), ids, tokenizer=object())
    with pytest.raises(ValueError, match="tokenizer= labels the input_ids of the example inputs, and they hold none"):
        Explorer(tm.vit(), tm.images(1), tokenizer=tm.tokenizer())
    with pytest.raises(TypeError, match="tokens= takes a list of strings"):
        Explorer(tm.gpt2(), ids, tokens="the cat sat")


def test_tokens_without_example_inputs_give_the_sequence_length():
    with Explorer(tm.gpt2(), tokens=["a", "b", "c"]) as ex:
        assert ex.tokens == [["a", "b", "c"]] and ex.sequences.lengths == (3,)


def test_the_widget_explorer_takes_tokens_too():
    from hookwidgets import HookExplorer

    with HookExplorer(tm.gpt2(), tm.token_ids(length=3), tokens=["a", "b", "c"]) as ex:
        assert ex.tokens == [["a", "b", "c"]]
