"""The model's tokenizer, through the ``tokenizers`` library (no transformers import).

``tokenizer.json`` holds everything encoding needs, special tokens included;
a bundle with only ``vocab.json`` + ``merges.txt`` is read as a byte-level BPE.
"""

from __future__ import annotations

from functools import cached_property, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mmctl.checkpoint.source import ModelSource
from mmctl.errors import InputError

if TYPE_CHECKING:
    from collections.abc import Iterable

    from tokenizers import Tokenizer as Backend


class Tokenizer:
    def __init__(self, backend: Backend, label: str) -> None:
        self._tok = backend
        self.label = label

    @classmethod
    def load(cls, source: ModelSource) -> Tokenizer:
        from tokenizers import Tokenizer as Backend

        path = source.find("tokenizer.json")
        try:
            if path is not None:
                return cls(Backend.from_file(str(path)), f"{source.label}/tokenizer.json")
            vocab, merges = source.find("vocab.json"), source.find("merges.txt")
            if vocab is None or merges is None:
                raise InputError(
                    f"{source.label} has no tokenizer.json (nor vocab.json + merges.txt)"
                )
            return cls(_byte_level_bpe(vocab, merges), f"{source.label}/vocab.json")
        except InputError:
            raise
        except Exception as err:  # the Rust side raises plain Exceptions
            raise InputError(f"cannot load the tokenizer from {source.label}: {err}") from None

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; special tokens written in it are recognised, none added."""
        return self._tok.encode(text, add_special_tokens=False).ids

    def encode_cached(self, text: str) -> tuple[int, ...]:
        """``encode`` for short strings that repeat (timestamps)."""
        return _cached(self._tok, text)

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

    @property
    def vocab_size(self) -> int:
        return self._tok.get_vocab_size(with_added_tokens=True)


@lru_cache(maxsize=4096)  # cache: a clip's timestamps repeat across calls
def _cached(backend: Backend, text: str) -> tuple[int, ...]:
    return tuple(backend.encode(text, add_special_tokens=False).ids)


def _byte_level_bpe(vocab: Path, merges: Path) -> Backend:
    from tokenizers import Tokenizer as Backend
    from tokenizers import decoders, models, pre_tokenizers

    tok = Backend(models.BPE.from_file(str(vocab), str(merges)))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return tok
