"""The stub's stand-in for a worker's own processor, serving a model no mmctl family handles.

A real vLLM worker serves such a model with the model's own processor: it
takes ``media_refs`` (the prompt's ids hold one unexpanded placeholder per
item, written by the model's chat template), fetches the media, and expands
each placeholder (``_get_prompt_updates``). mmctl knows neither the model's
tensors nor its expansion, so the stub cannot check preprocessed pixels for
it and refuses them; ``media_refs`` it processes as such a worker would:

* the placeholder ids are the model's own, from ``config.json``
  (``image_token_index`` / ``image_token_id``, ``video_token_index`` /
  ``video_token_id``), as vLLM's model classes read them;
* a request whose placeholders and items disagree is refused, as vLLM's
  prompt update refuses it;
* each placeholder becomes :func:`tokens_for` ids (the stand-in's own count,
  one per 28×28 cell of each sampled frame);
* the answer is read from the decoded media (the colours of each frame,
  the dominant pitch of each half second of a sound), so what reached the
  worker decides what it says.

Sound (AUDIO refs) comes this way for every model, a family's too: mmctl's
families describe pixels, and a request with sound is worker-processed as a
whole (:data:`mmctl.request.refs.SOUND_BY_WORKER`). A sound's placeholder
becomes :func:`audio_tokens_for` ids (the stand-in's count: one per 40 ms, as
a Whisper-style encoder's output frames).
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mmctl import modality
from mmctl.errors import MmctlError
from mmctl.media.probe import MediaKind
from mmctl.request.limits import check_item_limits
from mmctl.worker.answers import colour_names
from mmctl.worker.checks import Rejected
from mmctl.worker.media_refs import resolve

if TYPE_CHECKING:
    from mmctl.models.model import WorkerModel
    from mmctl.wire._gen.vllm_engine_pb2 import GenerateRequest

#: ``config.json`` keys naming a kind's placeholder id, as vLLM's model classes read them.
TOKEN_KEYS = {
    MediaKind.IMAGE: ("image_token_index", "image_token_id", "img_context_token_id"),
    MediaKind.VIDEO: ("video_token_index", "video_token_id"),
    MediaKind.AUDIO: ("audio_token_index", "audio_token_id"),
}
#: Where an omni checkpoint's config.json nests the multimodal model's ids
#: (Qwen2.5-Omni, Qwen3-Omni: the thinker's).
NESTED_CONFIGS = ("thinker_config",)
#: The stand-in's sound tokens: one per this many seconds.
AUDIO_TOKEN_S = 0.04
#: The answer's pitch windows.
PITCH_WINDOW_S = 0.5
#: Frames of a video the stand-in samples (uniformly).
VIDEO_FRAMES = 8
CELL = 28


def placeholder_ids(config: Mapping[str, Any]) -> dict[MediaKind, int]:
    """Each kind's placeholder id the model's config names (kinds it names none for:
    absent), at its top level or in an omni model's thinker config."""
    scopes = [config, *(config.get(k) for k in NESTED_CONFIGS)]
    found = {}
    for kind, keys in TOKEN_KEYS.items():
        for scope in scopes:
            if not isinstance(scope, Mapping):
                continue
            value = next((scope.get(k) for k in keys if _is_id(scope.get(k))), None)
            if value is not None:
                found[kind] = value
                break
    return found


def _is_id(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def audio_tokens_for(samples: int, rate: int) -> int:
    """The stand-in's expansion of one sound: a token per 40 ms (at least one)."""
    return max(1, -(-samples // max(1, round(rate * AUDIO_TOKEN_S))))


def pitches(audio: np.ndarray, rate: int) -> list[str]:
    """The dominant frequency of each half second (to 10 Hz), consecutive repeats merged."""
    window = max(1, int(rate * PITCH_WINDOW_S))
    out: list[str] = []
    for start in range(0, len(audio), window):
        part = audio[start : start + window]
        if len(part) < window // 4 and out:
            break  # a short tail says little; a whole short sound still counts
        spectrum = np.abs(np.fft.rfft(part * np.hanning(len(part))))
        spectrum[0] = 0.0  # the mean
        if not spectrum.any():
            name = "silence"
        else:
            hz = float(np.fft.rfftfreq(len(part), 1.0 / rate)[int(spectrum.argmax())])
            name = f"{int(round(hz / 10.0) * 10)} Hz"
        if not out or out[-1] != name:
            out.append(name)
    return out


def tokens_for(frames: list[np.ndarray]) -> int:
    """The stand-in's expansion of one item: a token per 28×28 cell of each frame."""
    return sum(-(-f.shape[0] // CELL) * -(-f.shape[1] // CELL) for f in frames)


def colours(frames: list[np.ndarray]) -> list[str]:
    """The dominant colour of each frame (over 28×28 cell means), consecutive repeats merged."""
    out: list[str] = []
    for frame in frames:
        side = min(CELL, frame.shape[0], frame.shape[1])
        rows, cols = frame.shape[0] // side, frame.shape[1] // side
        cells = frame[: rows * side, : cols * side].astype(np.float32)
        means = cells.reshape(rows, side, cols, side, 3)
        names = colour_names(means.mean(axis=(1, 3)).reshape(-1, 3))
        values, counts = np.unique(names, return_counts=True)
        dominant = str(values[counts.argmax()])
        if not out or out[-1] != dominant:
            out.append(dominant)
    return out


@dataclass(frozen=True)
class Decoded:
    """One item as the stand-in reads it: a video's sampled frames (an image's
    one), or a sound's mono waveform."""

    frames: list[np.ndarray]
    audio: np.ndarray | None = None
    rate: int = 0

    @property
    def tokens(self) -> int:
        if self.audio is not None:
            return audio_tokens_for(len(self.audio), self.rate)
        return tokens_for(self.frames)

    def answer(self) -> list[str]:
        if self.audio is not None:
            return pitches(self.audio, self.rate)
        return colours(self.frames)


@dataclass(frozen=True)
class Processed:
    ids: list[int]  # the prompt, each placeholder expanded
    colours: list[list[str]]  # per item, in prompt order: colours, or a sound's pitches


def process(
    req: GenerateRequest,
    model: WorkerModel,
    allowed_dir: Path | None,
    item_limits: dict[str, int] | None = None,
) -> Processed:
    """The prompt expanded and the items' colours, for a media_refs request."""
    if not req.media_refs.items:
        raise Rejected("media_refs is set but carries no items")
    kinds = []
    for n, ref in enumerate(req.media_refs.items):
        kind = modality.ref_from_wire(ref.modality)
        if kind is None:
            name = modality.WIRE_NAMES.get(ref.modality, str(ref.modality))
            raise Rejected(f"media_refs[{n}]: unsupported modality {name}")
        kinds.append(kind)
    if item_limits:
        try:
            check_item_limits([k.value for k in kinds], item_limits, "this worker")
        except MmctlError as err:
            raise Rejected(f"media_refs: {err.message}") from None
    ids = list(req.tokenized.input_ids)
    tokens = placeholder_ids(model.files.config)
    for kind in dict.fromkeys(kinds):
        if kind not in tokens:
            raise Rejected(
                f"media_refs: model_type {model.model_type!r} names no {kind.value} token in "
                f"its config.json ({' / '.join(TOKEN_KEYS[kind])}): it reads no {kind.value}"
            )
        found, wanted = ids.count(tokens[kind]), kinds.count(kind)
        if found != wanted:
            # vLLM's prompt update: each item needs its placeholder in the prompt.
            raise Rejected(
                f"media_refs: {wanted} {kind.value} item(s) but {found} {kind.value} "
                f"placeholder(s) (id {tokens[kind]}) in the prompt"
            )
    decoded: list[Decoded] = []
    with tempfile.TemporaryDirectory(prefix="mmctl-stub-") as tmp:
        for n, (ref, kind) in enumerate(zip(req.media_refs.items, kinds, strict=True)):
            path = resolve(ref.url, kind, Path(tmp), allowed_dir, n)
            try:
                decoded.append(_decode(path, kind))
            except MmctlError as err:
                raise Rejected(f"media_refs[{n}]: {err.message}") from None
    expanded: list[int] = []
    left = {kind: [d for d, k in zip(decoded, kinds, strict=True) if k is kind] for kind in tokens}
    order: list[Decoded] = []
    for token in ids:
        of = next((k for k, t in tokens.items() if t == token and k in kinds), None)
        if of is None:
            expanded.append(token)
            continue
        item = left[of].pop(0)  # as many as placeholders: counted above
        order.append(item)
        expanded.extend([token] * item.tokens)
    return Processed(expanded, [item.answer() for item in order])


def _decode(path: Path, kind: MediaKind) -> Decoded:
    if kind is MediaKind.AUDIO:
        from mmctl.media.audio import check_soundtrack, load_audio

        check_soundtrack(path)  # the worker's limits, before the waveform is held
        audio, info = load_audio(path)
        return Decoded([], audio, info.sample_rate)
    return Decoded(_frames(path, kind))


def _frames(path: Path, kind: MediaKind) -> list[np.ndarray]:
    if kind is MediaKind.IMAGE:
        from mmctl.media.image import load_image

        return [load_image(path)[1]]
    from mmctl.media.video import decode_sampled

    frames: dict[int, np.ndarray] = {}

    def sample(total: int, fps: float) -> np.ndarray:
        return np.unique(np.linspace(0, total - 1, min(VIDEO_FRAMES, total)).round().astype(int))

    def sink(at: int, frame: np.ndarray) -> None:
        frames[at] = frame.copy()

    _, indices = decode_sampled(path, sample, sink)
    return [frames[n] for n in range(len(indices))]


def echo(req: GenerateRequest, processed: Processed) -> str:
    """What arrived, for ``--answer echo``."""
    items = "; ".join(
        f"{modality.WIRE_NAMES.get(ref.modality, str(ref.modality))} by media_refs"
        for ref in req.media_refs.items
    )
    return f"{len(processed.ids)} prompt tokens; {items}"
