"""Dataset lines: the OpenAI batch format ``vllm run-batch`` reads, and mmctl's short form.

One JSON object a line, either

* ``{"custom_id": …, "method": "POST", "url": "/v1/chat/completions",
  "body": {"messages": [{"role": "user", "content": [{"type": "text", …},
  {"type": "video_url", "video_url": {"url": …}}, …]}], "max_tokens": …}}``, or
* ``{"id": …, "prompt": …, "media": ["clip.mp4", …], "max_tokens": …}``.

Media are local files: a path (relative to the dataset's folder), a
``file://`` URL on this host, a ``data:`` URL (written to a temporary file,
removed on close), or — only when the caller allows it — an ``http(s)://``
URL fetched with a size cap. A line that cannot map onto a gRPC request is an
:class:`InputError` naming the line and the field; :meth:`Items.entries`
yields it as an :class:`Entry` with that error, so a batch can write it as
an error line and go on.
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
    #: ``Sampling`` fields, checked for type (``stop`` a tuple): ``replace(sampling, **this)``.
    sampling: dict[str, Any] = field(default_factory=dict)


@dataclass
class Entry:
    """One line: its item, or why it cannot be one (``id`` as best the line says)."""

    number: int
    id: str
    item: Item | None = None
    error: str | None = None


class Items:
    """The items of a dataset file; ``data:`` and fetched media live in a
    folder removed on close. ``remote_cap``: the most bytes an ``http(s)://``
    medium may have (``None``: remote media are refused)."""

    def __init__(
        self, path: Path, *, data_urls: bool = True, remote_cap: int | None = None
    ) -> None:
        self.path, self.data_urls, self.remote_cap = path, data_urls, remote_cap
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
        """Every item; the first bad line raises its :class:`InputError`."""
        for number, line in self._lines():
            yield self.parse(line, number)

    def entries(self) -> Iterator[Entry]:
        """Every line as an :class:`Entry`, bad ones included (read lazily)."""
        for number, line in self._lines():
            try:
                item = self.parse(line, number)
            except InputError as err:
                yield Entry(number, _line_id(line, number), error=err.message)
            else:
                yield Entry(number, item.id, item)

    def count(self) -> int:
        return sum(1 for _ in self._lines())

    def _lines(self) -> Iterator[tuple[int, str]]:
        try:
            with self.path.open(encoding="utf-8") as f:
                for number, line in enumerate(f, 1):
                    if line.strip():
                        yield number, line
        except OSError as err:
            raise InputError(f"cannot read {self.path}: {err.strerror}") from None
        except UnicodeDecodeError:
            raise InputError(f"{self.path} is not UTF-8 text (one JSON object a line)") from None

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
            if self.remote_cap is None:
                raise InputError(
                    f"{where}: {ref}: remote media is not fetched without --allow-remote-media"
                )
            return self._fetch(ref, where)
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
        return self._keep(raw, mimetypes.guess_extension(head[5:].split(";")[0]) or ".bin")

    def _fetch(self, ref: str, where: str) -> Path:
        import urllib.error
        import urllib.request

        assert self.remote_cap is not None
        try:
            with urllib.request.urlopen(ref, timeout=30) as response:
                raw = response.read(self.remote_cap + 1)
                kind = response.headers.get_content_type()
        except (urllib.error.URLError, OSError, ValueError) as err:
            reason = getattr(err, "reason", err)
            raise InputError(f"{where}: cannot fetch {ref}: {reason}") from None
        if len(raw) > self.remote_cap:
            raise InputError(f"{where}: {ref} is over the {self.remote_cap:,}-byte cap")
        suffix = Path(urlparse(ref).path).suffix or mimetypes.guess_extension(kind) or ".bin"
        return self._keep(raw, suffix)

    def _keep(self, raw: bytes, suffix: str) -> Path:
        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="mmctl-media-")
        folder = Path(self._tmp.name)
        path = folder / f"{sum(1 for _ in folder.iterdir())}{suffix}"
        path.write_bytes(raw)
        return path


def _line_id(line: str, number: int) -> str:
    """The id a bad line names, if its JSON says one; else ``line-N``."""
    try:
        doc = json.loads(line)
    except json.JSONDecodeError:
        return f"line-{number}"
    if isinstance(doc, dict):
        for key in ("custom_id", "id"):
            if isinstance(doc.get(key), str | int):
                return str(doc[key])
    return f"line-{number}"


def _sampling(doc: dict[str, Any], where: str) -> dict[str, Any]:
    values = {k: doc[k] for k in SAMPLING if doc.get(k) is not None}
    if "max_completion_tokens" in values:
        values.setdefault("max_tokens", values.pop("max_completion_tokens"))
    if isinstance(values.get("stop"), str):
        values["stop"] = [values["stop"]]
    if isinstance(values.get("stop"), list):
        values["stop"] = tuple(values["stop"])  # as Sampling holds it
    for key, value in values.items():
        if key == "stop":
            ok = isinstance(value, tuple) and all(isinstance(s, str) for s in value)
        else:
            ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not ok:
            raise InputError(f"{where}: {key} has the wrong type ({type(value).__name__})")
    return values
