"""Dataset lines: the OpenAI batch format ``vllm run-batch`` reads, and mmctl's short form.

One JSON object a line, either

* ``{"custom_id": …, "method": "POST", "url": "/v1/chat/completions",
  "body": {"messages": [{"role": "user", "content": [{"type": "text", …},
  {"type": "video_url", "video_url": {"url": …}}, {"type": "input_audio",
  "input_audio": {"data": BASE64, "format": "wav"}}, …]}], "max_tokens": …}}``
  (``image_url``, ``video_url``, ``audio_url`` and ``input_audio`` parts), or
* ``{"id": …, "prompt": …, "media": ["clip.mp4", …], "max_tokens": …}``.

Media are a path (relative to the dataset's folder), a ``file://`` URL on
this host, a ``data:`` URL (decoded here; its bytes travel with the item:
:class:`Embedded`), or — only when the caller allows it — an ``http(s)://``
URL (:class:`Remote`), fetched with a size cap by the process that
preprocesses the item: on a Ray cluster, that node, never through a folder
of the driver's that other nodes cannot read. :func:`local_paths` turns an
item's media into files for the time they are read, and removes them. A line that cannot map onto a gRPC request is an
:class:`InputError` naming the line and the field; :meth:`Items.entries`
yields it as an :class:`Entry` with that error, so a batch can write it as
an error line and go on. No line can stop :meth:`Items.entries`: one that is
not UTF-8, over :data:`MAX_LINE_BYTES`, nested deeper than the JSON parser
goes, or odd in any other way is that line's error (``invalid_line``). An
``id``/``custom_id`` must be a string (an OpenAI batch's ``custom_id`` is
one); any other JSON value is the line's ``invalid_id`` error, written back
as the value it was. A UTF-8 byte-order mark before the first line is skipped.
"""

from __future__ import annotations

import base64
import binascii
import json
import mimetypes
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from mmctl.errors import InputError

#: Sampling fields a line may set (the rest of a chat body is refused by name).
SAMPLING = ("max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "seed", "stop")
_BODY_IGNORED = ("model", "stream", "n")
#: The longest line read (a ``data:`` URL of a 256 MB clip is ~341 MB of base64).
MAX_LINE_BYTES = 512 * 2**20
_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class Embedded:
    """A medium the line carries (a ``data:`` URL): its bytes, and the file
    suffix its media type names."""

    data: bytes = field(repr=False)
    suffix: str

    @property
    def label(self) -> str:
        return f"data:…{self.suffix} ({len(self.data):,} bytes)"


@dataclass(frozen=True)
class Remote:
    """An ``http(s)://`` medium, fetched (at most ``cap`` bytes) where it is read."""

    url: str
    cap: int
    #: The line it came from (``FILE:N``), for the error of a failed fetch.
    where: str

    @property
    def label(self) -> str:
        return self.url


#: A dataset's medium: a file here (shared storage, on a cluster), or one that
#: travels with the item and becomes a file only where it is read.
Medium = Path | Embedded | Remote


def label(medium: Medium) -> str:
    """How messages and output name a medium."""
    return str(medium) if isinstance(medium, Path) else medium.label


@contextmanager
def local_paths(media: Sequence[Medium]) -> Iterator[list[Path]]:
    """The media as files of this process's host for the ``with`` block:
    paths as they are; embedded bytes and fetched remote media written to a
    private temporary folder (this host's ``$TMPDIR``), removed at the end."""
    folder: Path | None = None
    try:
        paths = []
        for n, medium in enumerate(media):
            if isinstance(medium, Path):
                paths.append(medium)
                continue
            if folder is None:
                folder = Path(tempfile.mkdtemp(prefix="mmctl-media-"))
            if isinstance(medium, Embedded):
                data, suffix = medium.data, medium.suffix
            else:
                data, suffix = fetch(medium)
            path = folder / f"{n}{suffix}"
            path.write_bytes(data)
            paths.append(path)
        yield paths
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def fetch(remote: Remote) -> tuple[bytes, str]:
    """A remote medium's bytes (at most its cap) and the file suffix it gets."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(remote.url, timeout=30) as response:
            raw = response.read(remote.cap + 1)
            kind = response.headers.get_content_type()
    except (urllib.error.URLError, OSError, ValueError) as err:
        reason = getattr(err, "reason", err)
        raise InputError(f"{remote.where}: cannot fetch {remote.url}: {reason}") from None
    if len(raw) > remote.cap:
        raise InputError(f"{remote.where}: {remote.url} is over the {remote.cap:,}-byte cap")
    suffix = Path(urlparse(remote.url).path).suffix or mimetypes.guess_extension(kind) or ".bin"
    return raw, suffix


@dataclass
class Item:
    """One request a dataset line asks for."""

    id: str
    prompt: str
    media: list[Medium]
    system: str | None = None
    #: ``Sampling`` fields, checked for type (``stop`` a tuple): ``replace(sampling, **this)``.
    sampling: dict[str, Any] = field(default_factory=dict)


@dataclass
class Entry:
    """One line: its item, or why it cannot be one (``id`` as best the line says)."""

    number: int
    #: The key of the line's id (:func:`id_key`): the id itself when it is a string.
    id: str
    item: Item | None = None
    error: str | None = None
    #: The error's code in the output line: ``invalid_line`` or ``invalid_id``.
    code: str = "invalid_line"
    #: The id as the line gave it (a JSON value), when it is not a string.
    raw_id: Any = None

    @property
    def custom_id(self) -> Any:
        """The ``custom_id`` an output line carries: the id as it was."""
        return self.raw_id if self.code == "invalid_id" else self.id


class InvalidId(InputError):
    """A line's id is not a string."""

    def __init__(self, message: str, value: Any) -> None:
        super().__init__(message)
        self.value = value


def id_key(value: Any) -> str:
    """A string that names an id: the id when it is a string, else its JSON
    (marked, so that the id ``"null"`` and a ``null`` id differ)."""
    if isinstance(value, str):
        return value
    return "\0" + json.dumps(value, sort_keys=True, separators=(",", ":"))


class Items:
    """The items of a dataset file. ``data_urls``: whether ``data:`` media
    are taken; ``remote_cap``: the most bytes an ``http(s)://`` medium may
    have (``None``: remote media are refused)."""

    def __init__(
        self, path: Path, *, data_urls: bool = True, remote_cap: int | None = None
    ) -> None:
        self.path, self.data_urls, self.remote_cap = path, data_urls, remote_cap

    def __enter__(self) -> Items:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Nothing to remove: media become files only where they are read (:func:`local_paths`)."""

    def __iter__(self) -> Iterator[Item]:
        """Every item; the first bad line raises its :class:`InputError`."""
        for number, line, problem in self._lines():
            if problem is not None:
                raise InputError(problem)
            yield self.parse(line, number)

    def entries(self) -> Iterator[Entry]:
        """Every line as an :class:`Entry`, bad ones included (read lazily)."""
        for number, line, problem in self._lines():
            if problem is not None:
                yield Entry(number, f"line-{number}", error=problem)
                continue
            try:
                item = self.parse(line, number)
            except InvalidId as err:
                yield Entry(number, id_key(err.value), error=err.message, code="invalid_id",
                            raw_id=err.value)  # fmt: skip
            except InputError as err:
                yield Entry(number, _line_id(line, number), error=err.message)
            except Exception as err:  # an odd line is that line's error, never the run's
                where = f"{self.path.name}:{number}"
                message = f"{where}: cannot be read ({type(err).__name__}: {err})"
                yield Entry(number, _line_id(line, number), error=message)
            else:
                yield Entry(number, item.id, item)

    def count(self) -> int:
        return sum(1 for _ in self._lines())

    def _lines(self) -> Iterator[tuple[int, str, str | None]]:
        """``(number, text, None)`` per non-blank line, or ``(number, "", why)``
        for a line that cannot be text (not UTF-8, too long)."""
        where = self.path.name
        try:
            with self.path.open("rb") as f:
                number = 0
                while True:
                    raw = f.readline(MAX_LINE_BYTES + 1)
                    if not raw:
                        return
                    number += 1
                    if number == 1 and raw.startswith(_BOM):
                        raw = raw[len(_BOM) :]
                    if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                        while (rest := f.readline(2**20)) and not rest.endswith(b"\n"):
                            pass  # the rest of the line, unread
                        problem = f"{where}:{number}: the line is over {MAX_LINE_BYTES:,} bytes"
                        yield number, "", problem
                        continue
                    try:
                        line = raw.decode("utf-8")
                    except UnicodeDecodeError as err:
                        yield number, "", f"{where}:{number}: not UTF-8 text (byte {err.start + 1})"
                        continue
                    if line.strip():
                        yield number, line, None
        except OSError as err:
            raise InputError(f"cannot read {self.path}: {err.strerror}") from None

    def parse(self, line: str, number: int) -> Item:
        where = f"{self.path.name}:{number}"
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as err:
            raise InputError(f"{where}: not JSON ({err.msg})") from None
        except RecursionError:
            raise InputError(f"{where}: JSON nested too deep") from None
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
            id=_id(doc, "id", where),
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
        media: list[Medium] = []
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
                elif kind in ("video_url", "image_url", "audio_url"):
                    ref = part.get(kind)
                    ref = ref.get("url") if isinstance(ref, dict) else ref
                    if not isinstance(ref, str):
                        raise InputError(f"{where}: body.messages[{n}]: {kind}.url is required")
                    media.append(self._media(ref, where))
                elif kind == "input_audio":
                    media.append(self._input_audio(part.get(kind), f"{where}: body.messages[{n}]"))
                else:
                    raise InputError(
                        f"{where}: body.messages[{n}].content type {kind!r} is not text, "
                        "image_url, video_url, audio_url or input_audio"
                    )
        return Item(
            id=_id(doc, "custom_id", where),
            prompt="\n".join(texts),
            media=media,
            system=system,
            sampling=_sampling(body, where),
        )

    def _input_audio(self, part: Any, where: str) -> Embedded:
        """OpenAI's ``{"input_audio": {"data": BASE64, "format": "wav"}}``: the sound inside the line."""
        if not self.data_urls:
            raise InputError(f"{where}: input_audio carries its sound inline; not accepted here")
        data = part.get("data") if isinstance(part, dict) else None
        fmt = part.get("format") if isinstance(part, dict) else None
        if not isinstance(data, str) or not isinstance(fmt, str) or not fmt.isalnum():
            raise InputError(f"{where}: input_audio needs data (base64) and format (wav, mp3, …)")
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise InputError(f"{where}: input_audio.data is not valid base64") from None
        return Embedded(raw, "." + fmt.lower())

    def _media(self, ref: str, where: str) -> Medium:
        parsed = urlparse(ref)
        if parsed.scheme in ("http", "https"):
            if self.remote_cap is None:
                raise InputError(
                    f"{where}: {ref}: remote media is not fetched without --allow-remote-media"
                )
            return Remote(ref, self.remote_cap, where)
        if parsed.scheme == "data":
            if not self.data_urls:
                raise InputError(f"{where}: data: URLs are not accepted here; use a file")
            return _data_url(ref, where)
        if parsed.scheme == "file":
            if parsed.netloc not in ("", "localhost"):
                raise InputError(f"{where}: {ref}: a file:// URL must name this host")
            return Path(unquote(parsed.path))
        if parsed.scheme and len(parsed.scheme) > 1:
            raise InputError(f"{where}: {ref}: unsupported URL scheme {parsed.scheme}:")
        path = Path(ref).expanduser()
        return path if path.is_absolute() else self.path.parent / path


def _data_url(ref: str, where: str) -> Embedded:
    head, sep, payload = ref.partition(",")
    if not sep or not head.endswith(";base64"):
        raise InputError(f"{where}: a data: URL must be base64 (data:video/mp4;base64,…)")
    try:
        raw = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise InputError(f"{where}: the data: URL is not valid base64") from None
    return Embedded(raw, mimetypes.guess_extension(head[5:].split(";")[0]) or ".bin")


def _id(doc: dict[str, Any], key: str, where: str) -> str:
    """The line's id: a string as given, ``FILE:N`` when absent."""
    if key not in doc:
        return where
    value = doc[key]
    if not isinstance(value, str):
        shown = json.dumps(value)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        raise InvalidId(f"{where}: {key} must be a string; got {shown}", value)
    return value


def _line_id(line: str, number: int) -> str:
    """The id a bad line names, if its JSON says one (a string); else ``line-N``."""
    try:
        doc = json.loads(line)
    except (ValueError, RecursionError):
        return f"line-{number}"
    if isinstance(doc, dict):
        for key in ("custom_id", "id"):
            if isinstance(doc.get(key), str):
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
