"""A family's special token ids, as the prompt and the request read them."""

from __future__ import annotations

from typing import Protocol

from mmctl.media.probe import MediaKind


class Tokens(Protocol):
    """A family's special token ids (from ``config.json`` or the tokenizer)."""

    def placeholder(self, kind: MediaKind) -> int:
        """The token the chat template writes once per item of ``kind``."""
        ...

    def embed(self, kind: MediaKind) -> int:
        """The token whose positions receive the item's embeddings (``im_token_id``)."""
        ...

    def markers(self) -> dict[int, str]:
        """Structural tokens an account of the layout shows by name."""
        ...

    def as_dict(self) -> dict[str, int]:
        """By the ``config.json`` key (or token) each mirrors (``--json``)."""
        ...
