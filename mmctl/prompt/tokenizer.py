"""The model's tokenizer, through the ``tokenizers`` library (no transformers import).

``tokenizer.json`` holds everything encoding needs, special tokens included;
a bundle with only ``vocab.json`` + ``merges.txt`` is read as a byte-level BPE.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mmctl.checkpoint.source import ModelSource
from mmctl.errors import InputError

if TYPE_CHECKING:
    from collections.abc import Iterable

    from tokenizers import Tokenizer as Backend


#: How many short strings a tokenizer keeps encoded (a clip's timestamps: a few hundred).
SHORT_CACHE_SIZE = 4096
#: How many parsed tokenizers a process keeps, the most recently used, by their
#: files' contents (cache): a Client, a batch or a test run prepares many
#: requests of one model, and parsing its tokenizer.json took 0.4-1.4 s each
#: time (Gemma 4's: 1.2 s and 290 MB). Bounded, unlike the cache that kept
#: every tokenizer alive.
LOADED_CACHE_SIZE = 4
_loaded: OrderedDict[tuple[str, ...], Backend] = OrderedDict()
_loaded_lock = threading.Lock()


class Tokenizer:
    def __init__(self, backend: Backend, label: str) -> None:
        self._tok = backend
        self.label = label
        # cache: the encodings of short strings that repeat across calls (a clip's
        # timestamps). It lives and dies with this tokenizer: a module-level cache
        # keyed by the backend kept every tokenizer a process ever loaded alive
        # (hundreds of MB each for a large vocabulary).
        self._short: dict[str, tuple[int, ...]] = {}

    @classmethod
    def load(cls, source: ModelSource) -> Tokenizer:
        """``source``'s tokenizer. Files with the same contents as one of the
        :data:`LOADED_CACHE_SIZE` most recently loaded are not parsed again
        (a worker's tokenizer bundle lands in a new folder for each session)."""
        path = source.find("tokenizer.json")
        if path is not None:
            files, label = [path], f"{source.label}/tokenizer.json"
        else:
            vocab, merges = source.find("vocab.json"), source.find("merges.txt")
            if vocab is None or merges is None:
                raise InputError(
                    f"{source.label} has no tokenizer.json (nor vocab.json + merges.txt)"
                )
            files, label = [vocab, merges], f"{source.label}/vocab.json"
        try:
            key = tuple(_digest(f) for f in files)
            with _loaded_lock:
                backend = _loaded.get(key)
                if backend is not None:
                    _loaded.move_to_end(key)
            if backend is None:
                backend = _parse(files)
                with _loaded_lock:
                    _loaded[key] = backend
                    while len(_loaded) > LOADED_CACHE_SIZE:
                        _loaded.popitem(last=False)
        except Exception as err:  # OSError; the Rust side raises plain Exceptions
            raise InputError(f"cannot load the tokenizer from {source.label}: {err}") from None
        return cls(backend, label)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; special tokens written in it are recognised, none added."""
        return self._tok.encode(text, add_special_tokens=False).ids

    def encode_cached(self, text: str) -> tuple[int, ...]:
        """``encode`` for short strings that repeat (timestamps)."""
        ids = self._short.get(text)
        if ids is None:
            if len(self._short) >= SHORT_CACHE_SIZE:
                self._short.clear()
            ids = self._short[text] = tuple(self._tok.encode(text, add_special_tokens=False).ids)
        return ids

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = False) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def token_to_id(self, token: str) -> int | None:
        return self._tok.token_to_id(token)

    def id_to_token(self, token_id: int) -> str | None:
        return self._tok.id_to_token(int(token_id))

    @cached_property
    def special_tokens(self) -> tuple[str, ...]:
        """The control tokens (``<|im_start|>``, ``<|video_pad|>``, …) that their
        text becomes when written in a prompt."""
        decoder: dict[int, Any] = getattr(self._tok, "get_added_tokens_decoder", dict)()
        return tuple(t.content for t in decoder.values() if t.special)

    def find_special(self, text: str) -> tuple[str, int] | None:
        """The first control token written in ``text`` and its character offset."""
        found = [(text.find(t), t) for t in self.special_tokens if t in text]
        if not found:
            return None
        at, token = min(found)
        return token, at

    @cached_property
    def max_token_bytes(self) -> int | None:
        """The most bytes of normalized text one token stands for; None where
        no such bound holds (a pre-tokenizer that leaves text out of every
        token, as whitespace splitting does). A byte-level vocabulary spells
        each byte as one character; any other spells its text as it is."""
        pre = _spec(self._tok.pre_tokenizer)
        if pre is None or _has(pre, lambda n: n.get("type") in _DROPPING or
                               n.get("behavior") == "Removed"):  # fmt: skip
            return None
        byte_level = _has(pre, lambda n: n.get("type") == "ByteLevel")
        vocab = self._tok.get_vocab(with_added_tokens=False)
        added: dict[int, Any] = getattr(self._tok, "get_added_tokens_decoder", dict)()
        longest = max((len(t) if byte_level else len(t.encode()) for t in vocab), default=0)
        longest = max([longest, *(len(t.content.encode()) for t in added.values())])
        return longest or None

    def least_tokens(self, text: str, context: int) -> int | None:
        """A lower bound of ``len(encode(text))`` found without encoding it: each
        token stands for at most :attr:`max_token_bytes` bytes of the
        normalized text. None when no bound is known, or when it cannot exceed
        ``context`` (at most ``context`` bytes of text: encoding that is cheap,
        and exact)."""
        if 4 * len(text) <= context:  # UTF-8: at most 4 bytes a character
            return None
        longest = self.max_token_bytes
        nbytes = _least_normalized_bytes(_spec(self._tok.normalizer), text)
        if longest is None or nbytes is None:
            return None
        return -(-nbytes // longest)

    @property
    def vocab_size(self) -> int:
        return self._tok.get_vocab_size(with_added_tokens=True)


#: Pre-tokenizers that leave text out of every token (whitespace, delimiters).
_DROPPING = {"Whitespace", "WhitespaceSplit", "BertPreTokenizer", "CharDelimiterSplit"}
#: Normalizers Python's ``unicodedata`` applies alike (and fast: ASCII passes unchanged).
_UNICODE_FORMS = {"NFC", "NFD", "NFKC", "NFKD"}


def _spec(part: Any) -> dict[str, Any] | None:
    """A normalizer's or pre-tokenizer's JSON description; ``{}`` for none,
    None when it cannot be read (then nothing is promised)."""
    import json

    if part is None:
        return {}
    try:
        spec = json.loads(part.__getstate__())
    except (TypeError, ValueError, AttributeError):
        return None
    return spec if isinstance(spec, dict) else None


def _has(node: Any, test: Callable[[dict[str, Any]], bool]) -> bool:
    if isinstance(node, list):
        return any(_has(n, test) for n in node)
    if not isinstance(node, dict):
        return False
    return test(node) or any(_has(v, test) for v in node.values())


def _least_normalized_bytes(spec: dict[str, Any] | None, text: str) -> int | None:
    """At most how many bytes ``text`` has once normalized, without running the
    tokenizer's normalizer (on 50 MB it took 9 s and 1.8 GB: it keeps an
    offset per byte). Unicode forms are applied here; steps that only add
    text (``Prepend``, a ``Replace`` by something no shorter) are left out,
    which keeps the count a lower bound; any other step: None."""
    import unicodedata

    if spec is None:
        return None
    steps = spec.get("normalizers") if spec.get("type") == "Sequence" else [spec] if spec else []
    for step in steps or []:
        kind = step.get("type") if isinstance(step, dict) else None
        if kind in _UNICODE_FORMS:
            text = unicodedata.normalize(kind, text)
        elif kind == "Prepend" or (
            kind == "Replace"
            and isinstance(step.get("pattern"), dict)
            and isinstance(step["pattern"].get("String"), str)
            and len(str(step.get("content", "")).encode())
            >= len(step["pattern"]["String"].encode())
        ):
            continue
        else:
            return None
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _digest(path: Path) -> str:
    """A file's contents, as the load cache knows them (13 MB: ~30 ms; parsing: 1.2 s)."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _parse(files: list[Path]) -> Backend:
    from tokenizers import Tokenizer as Backend

    if len(files) == 1:
        return Backend.from_file(str(files[0]))
    return _byte_level_bpe(*files)


def _byte_level_bpe(vocab: Path, merges: Path) -> Backend:
    from tokenizers import Tokenizer as Backend
    from tokenizers import decoders, models, pre_tokenizers

    tok = Backend(models.BPE.from_file(str(vocab), str(merges)))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return tok
