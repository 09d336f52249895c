"""Dataset lines: the OpenAI batch format ``vllm run-batch`` reads, and mmctl's short form.

One JSON object a line, either

* ``{"custom_id": …, "method": "POST", "url": "/v1/chat/completions",
  "body": {"messages": [{"role": "user", "content": [{"type": "text", …},
  {"type": "video_url", "video_url": {"url": …}}, …]}], "max_tokens": …}}``, or
* ``{"id": …, "prompt": …, "media": ["clip.mp4", …], "max_tokens": …}``.

Media are local files: a path (relative to the dataset's folder), a
``file://`` URL on this host, or a ``data:`` URL (written to a temporary
file the caller removes). A line that cannot map onto a gRPC request is an
:class:`InputError` naming the line and the field.
"""

from __future__ import annotations

import base64
import binascii
import json
import mimetypes
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from mmctl.errors import InputError

#: Sampling fields a line may set (the rest of a chat body is refused by name).
SAMPLING = ("max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "seed", "stop")
_BODY_IGNORED = ("model", "stream", "n")


@dataclass
class Item:
    """One request a dataset line asks for."""

    id: str
    prompt: str
    media: list[Path]
    system: str | None = None
    sampling: dict[str, Any] = field(default_factory=dict)


class Items:
    """The items of a dataset file; ``data:`` media live in a folder removed on close."""

    def __init__(self, path: Path, *, data_urls: bool = True) -> None:
        self.path, self.data_urls = path, data_urls
        self._tmp: tempfile.TemporaryDirectory[str] | None = None

    def __enter__(self) -> Items:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __iter__(self) -> Iterator[Item]:
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except OSError as err:
            raise InputError(f"cannot read {self.path}: {err.strerror}") from None
        except UnicodeDecodeError:
            raise InputError(f"{self.path} is not UTF-8 text (one JSON object a line)") from None
        for number, line in enumerate(lines, 1):
            if line.strip():
                yield self.parse(line, number)

    def parse(self, line: str, number: int) -> Item:
        where = f"{self.path.name}:{number}"
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as err:
            raise InputError(f"{where}: not JSON ({err.msg})") from None
        if not isinstance(doc, dict):
            raise InputError(f"{where}: a line is one JSON object")
        if "body" in doc or "custom_id" in doc:
            return self._openai(doc, where)
        return self._short(doc, where)

    def _short(self, doc: dict[str, Any], where: str) -> Item:
        media = doc.get("media", [])
        if isinstance(media, str):
            media = [media]
        if not isinstance(media, list) or not all(isinstance(m, str) for m in media):
            raise InputError(f"{where}: media must be a list of paths")
        prompt = doc.get("prompt", "")
        if not isinstance(prompt, str):
            raise InputError(f"{where}: prompt must be a string")
        return Item(
            id=str(doc.get("id", where)),
            prompt=prompt,
            media=[self._media(m, where) for m in media],
            system=doc.get("system"),
            sampling=_sampling(doc, where),
        )

    def _openai(self, doc: dict[str, Any], where: str) -> Item:
        url = doc.get("url", "/v1/chat/completions")
        if url != "/v1/chat/completions":
            raise InputError(f"{where}: url {url!r}: only /v1/chat/completions maps onto Generate")
        body = doc.get("body")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            raise InputError(f"{where}: body.messages is required")
        unknown = [k for k in body if k not in (*SAMPLING, *_BODY_IGNORED, "messages")]
        if unknown:
            raise InputError(f"{where}: body.{unknown[0]} has no gRPC equivalent")
        texts: list[str] = []
        media: list[Path] = []
        system = None
        for n, message in enumerate(body["messages"]):
            role = message.get("role") if isinstance(message, dict) else None
            content = message.get("content") if isinstance(message, dict) else None
            if role == "system" and isinstance(content, str):
                system = content
                continue
            if role != "user":
                raise InputError(f"{where}: body.messages[{n}].role {role!r}: only system and user")
            parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
            for part in parts or []:
                kind = part.get("type") if isinstance(part, dict) else None
                if kind == "text":
                    texts.append(str(part.get("text", "")))
                elif kind in ("video_url", "image_url"):
                    ref = part.get(kind)
                    ref = ref.get("url") if isinstance(ref, dict) else ref
                    if not isinstance(ref, str):
                        raise InputError(f"{where}: body.messages[{n}]: {kind}.url is required")
                    media.append(self._media(ref, where))
                else:
                    raise InputError(
                        f"{where}: body.messages[{n}].content type {kind!r} is not text, "
                        "image_url or video_url"
                    )
        return Item(
            id=str(doc.get("custom_id", where)),
            prompt="\n".join(texts),
            media=media,
            system=system,
            sampling=_sampling(body, where),
        )

    def _media(self, ref: str, where: str) -> Path:
        parsed = urlparse(ref)
        if parsed.scheme in ("http", "https"):
            raise InputError(f"{where}: {ref}: remote media is not fetched; use a local file")
        if parsed.scheme == "data":
            if not self.data_urls:
                raise InputError(f"{where}: data: URLs are not accepted here; use a file")
            return self._data_url(ref, where)
        if parsed.scheme == "file":
            if parsed.netloc not in ("", "localhost"):
                raise InputError(f"{where}: {ref}: a file:// URL must name this host")
            return Path(unquote(parsed.path))
        if parsed.scheme and len(parsed.scheme) > 1:
            raise InputError(f"{where}: {ref}: unsupported URL scheme {parsed.scheme}:")
        path = Path(ref).expanduser()
        return path if path.is_absolute() else self.path.parent / path

    def _data_url(self, ref: str, where: str) -> Path:
        head, sep, payload = ref.partition(",")
        if not sep or not head.endswith(";base64"):
            raise InputError(f"{where}: a data: URL must be base64 (data:video/mp4;base64,…)")
        try:
            raw = base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            raise InputError(f"{where}: the data: URL is not valid base64") from None
        mime = head[5:].split(";")[0]
        suffix = mimetypes.guess_extension(mime) or ".bin"
        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="mmctl-data-")
        path = Path(self._tmp.name) / f"{len(list(Path(self._tmp.name).iterdir()))}{suffix}"
        path.write_bytes(raw)
        return path


def _sampling(doc: dict[str, Any], where: str) -> dict[str, Any]:
    values = {k: doc[k] for k in SAMPLING if doc.get(k) is not None}
    if "max_completion_tokens" in values:
        values.setdefault("max_tokens", values.pop("max_completion_tokens"))
    if isinstance(values.get("stop"), str):
        values["stop"] = [values["stop"]]
    for key, value in values.items():
        if key == "stop":
            ok = isinstance(value, list) and all(isinstance(s, str) for s in value)
        else:
            ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not ok:
            raise InputError(f"{where}: {key} has the wrong type ({type(value).__name__})")
    return values
