"""The tokenizer wrapper: the short-string cache gives ``encode``'s ids and is the
tokenizer's own (it must not keep a dropped tokenizer alive)."""

from __future__ import annotations

import gc
import sys

from tokenizers import Tokenizer as Backend
from tokenizers import models, pre_tokenizers

from mmctl.prompt import tokenizer as tokenizer_module
from mmctl.prompt.tokenizer import Tokenizer


def _backend() -> Backend:
    vocab = {"[UNK]": 0, "<": 1, "0.5": 2, "seconds": 3, ">": 4}
    backend = Backend(models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    return backend


def test_cached_encodings_are_encodes():
    tok = Tokenizer(_backend(), "test")
    for text in ("< 0.5 seconds >", "0.5", "< 0.5 seconds >", "nothing known"):
        assert list(tok.encode_cached(text)) == tok.encode(text)


def test_the_cache_holds_no_reference_to_the_backend():
    # A module-level cache keyed by the backend kept every tokenizer a process
    # ever loaded alive: a pytest worker grew past 5 GB and was OOM-killed beside
    # the engine check.
    backend = _backend()
    tok = Tokenizer(backend, "test")
    gc.collect()
    before = sys.getrefcount(backend)
    tok.encode_cached("< 0.5 seconds >")
    gc.collect()
    assert sys.getrefcount(backend) == before


def test_the_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(tokenizer_module, "SHORT_CACHE_SIZE", 3)
    tok = Tokenizer(_backend(), "test")
    for i in range(10):
        assert tok.encode_cached(f"{i} seconds") == (0, 3)
    assert len(tok._short) <= 3
