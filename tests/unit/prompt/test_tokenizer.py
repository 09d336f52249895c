"""The tokenizer wrapper: the short-string cache gives ``encode``'s ids and is the
tokenizer's own (it must not keep a dropped tokenizer alive); a tokenizer is
parsed once while its files are unchanged, and only a few stay loaded."""

from __future__ import annotations

import gc
import shutil
import sys
from collections import OrderedDict
from pathlib import Path

import pytest
from tokenizers import Tokenizer as Backend
from tokenizers import models, pre_tokenizers

from mmctl.checkpoint.source import resolve
from mmctl.errors import InputError
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


FAMILIES = Path(__file__).resolve().parents[2] / "fixtures" / "families"


@pytest.fixture
def llava_copy(tmp_path, monkeypatch):
    """A folder of its own holding LLaVA's tokenizer, with an empty load cache."""
    monkeypatch.setattr(tokenizer_module, "_loaded", OrderedDict())
    folder = tmp_path / "llava"
    folder.mkdir()
    shutil.copy(FAMILIES / "llava" / "tokenizer.json", folder / "tokenizer.json")
    return folder


def _counting_parse(monkeypatch) -> list[int]:
    parsed: list[int] = []
    real = tokenizer_module._parse
    monkeypatch.setattr(tokenizer_module, "_parse", lambda files: parsed.append(1) or real(files))
    return parsed


def test_a_tokenizer_is_parsed_once_for_the_same_contents(llava_copy, tmp_path, monkeypatch):
    parsed = _counting_parse(monkeypatch)
    first = Tokenizer.load(resolve(llava_copy))
    # a worker's bundle: the same file in a new folder each session
    elsewhere = shutil.copytree(llava_copy, tmp_path / "bundle")
    again = Tokenizer.load(resolve(elsewhere))
    assert again._tok is first._tok and len(parsed) == 1
    assert again.label == f"{elsewhere}/tokenizer.json"  # named by its own folder
    path = llava_copy / "tokenizer.json"
    path.write_bytes(path.read_bytes() + b"\n")  # new contents: parsed again
    changed = Tokenizer.load(resolve(llava_copy))
    assert changed._tok is not first._tok and len(parsed) == 2
    assert changed.encode("a photo of a cat") == first.encode("a photo of a cat")


def test_the_load_cache_is_bounded_and_lets_the_oldest_go(llava_copy, tmp_path, monkeypatch):
    monkeypatch.setattr(tokenizer_module, "LOADED_CACHE_SIZE", 2)
    folders = [llava_copy]
    for i in range(2):
        folder = shutil.copytree(llava_copy, tmp_path / f"copy{i}")
        path = folder / "tokenizer.json"
        path.write_bytes(path.read_bytes() + b" " * (i + 1))  # contents of its own
        folders.append(folder)
    for folder in folders:
        Tokenizer.load(resolve(folder))
    assert len(tokenizer_module._loaded) == 2
    parsed = _counting_parse(monkeypatch)
    Tokenizer.load(resolve(folders[2]))  # kept
    Tokenizer.load(resolve(folders[0]))  # let go: parsed again
    assert len(parsed) == 1


def test_a_broken_tokenizer_is_not_kept(llava_copy):
    (llava_copy / "tokenizer.json").write_text("{not json")
    for _ in range(2):
        with pytest.raises(InputError, match="cannot load the tokenizer"):
            Tokenizer.load(resolve(llava_copy))
    assert not tokenizer_module._loaded
