"""``Tokenizer.least_tokens``: a lower bound of a text's token count, found
without encoding it (a 50 MB prompt is refused from its length). It must never
exceed the true count — or a prompt that fits would be refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mmctl.models.model import load_model

FAMILIES = Path(__file__).resolve().parents[2] / "fixtures" / "families"
MODELS = ["builtin", "llava", "llava_next", "llama4", "llava_onevision"]


@pytest.fixture(scope="module", params=MODELS)
def tokenizer(request):
    if request.param == "builtin":
        return load_model().tokenizer
    return load_model(model_dir=FAMILIES / request.param).tokenizer


#: Texts where one token covers the most: runs the vocabularies hold whole,
#: composable and compatibility characters, special tokens spelled out.
HARD = [
    " " * 5000,
    "-" * 4000 + "=" * 4000,
    "/" + "*" * 3000,
    "\n" * 3000,
    "e\u0301" * 2000,  # composes to é under NFC
    "\u1100\u1161\u11a8" * 1500,  # Hangul jamo: 9 bytes compose into 3
    "ﬃ" * 1000,
    "<|im_start|><|vision_start|><|video_pad|>" * 300,
    "hello world " * 2000,
]


@pytest.mark.parametrize("text", HARD, ids=range(len(HARD)))
def test_the_bound_never_exceeds_the_count_on_hard_texts(tokenizer, text):
    least = tokenizer.least_tokens(text, 0)
    if least is not None:
        assert least <= len(tokenizer.encode(text))


@settings(max_examples=60, derandomize=True, database=None, deadline=None)
@given(st.text(min_size=1, max_size=400))
def test_the_bound_never_exceeds_the_count(tokenizer, text):
    least = tokenizer.least_tokens(text, 0)
    if least is not None:
        assert least <= len(tokenizer.encode(text))


def test_short_texts_are_left_to_the_tokenizer(tokenizer):
    # At most `context` bytes: encoding is cheap and exact, nothing is promised.
    assert tokenizer.least_tokens("x" * 1000, 4000) is None


def test_a_50_mb_prompt_is_bounded_without_encoding_it():
    tok = load_model().tokenizer
    big = "hello world " * (50_000_000 // 12)
    assert tok.max_token_bytes == 128  # the longest token: 128 spaces
    assert tok.least_tokens(big, 262_144) == 390_625  # > the context: refused
