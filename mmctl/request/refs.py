"""A request the worker preprocesses: ``media_refs`` URLs beside the prompt's ids.

One builder for ``send``, ``bench`` and ``batch``: :func:`media_refs` names
each medium (``data:`` carries the file, ``file:`` the path the worker must
see), :func:`refs_plan` writes the prompt with the model's own chat template
(which alone knows where a model's media placeholders go; the worker expands
them) into a :class:`~mmctl.request.build.RequestPlan` with no tensors.
The two steps are apart so the batch engines can read the files where they
preprocess and write the prompt where the tokenizer is.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from mmctl.choices import MediaRef
from mmctl.errors import InputError, UsageError
from mmctl.media.probe import MediaKind, media_type
from mmctl.request.build import RequestPlan, Sampling, new_request_id

if TYPE_CHECKING:
    from mmctl.models.family import Family
    from mmctl.models.model import Model, WorkerModel

#: Why a request with sound is processed by the worker as a whole (ARCHITECTURE §3).
SOUND_BY_WORKER = (
    "a request with sound is processed by the worker as a whole: smg-grpc-servicer names "
    "every preprocessed tensor batch but video 'image', so sound cannot travel preprocessed, "
    "and it refuses media_refs beside preprocessed tensors"
)


def by_worker(kinds: Iterable[MediaKind], family: Family | None) -> str | None:
    """Why a request carrying media of ``kinds`` is processed by the worker as a whole
    (``None``: it need not be): sound, for every family (:data:`SOUND_BY_WORKER`), or a
    kind ``family``'s vLLM model cannot take preprocessed (``Family.worker_kinds``:
    Nemotron's images). The one rule ``build``, ``send``, ``inspect-tokens`` and the
    stub worker follow."""
    found = set(kinds)
    if MediaKind.AUDIO in found:
        return SOUND_BY_WORKER
    for kind, reason in family.worker_kinds if family is not None else ():
        if kind in found:
            return reason
    return None


def media_refs(
    media: Sequence[Path], kinds: Sequence[MediaKind], how: MediaRef
) -> list[tuple[MediaKind, str]]:
    """Each medium as a URL the worker fetches: ``data:`` carrying the bytes, or ``file:``."""
    refs = []
    for path, kind in zip(media, kinds, strict=True):
        if how is MediaRef.FILE:
            url = path.resolve().as_uri()  # the worker must see this path (same host)
        else:
            url = f"data:{media_type(path)};base64," + base64.b64encode(path.read_bytes()).decode()
        refs.append((kind, url))
    return refs


def refs_plan(
    refs: Sequence[tuple[MediaKind, str]],
    prompt: str | None,
    model: Model | WorkerModel,
    *,
    system: str | None = None,
    chat: bool = True,
    allow_special_tokens: bool = False,
    sampling: Sampling | None = None,
    stream: bool = True,
    request_id: str | None = None,
) -> RequestPlan:
    """The request: the chat text with one placeholder per medium, its ids, the refs."""
    from mmctl.models.model import WorkerModel
    from mmctl.request.compose import render_prompt

    sound = any(kind is MediaKind.AUDIO for kind, _ in refs)
    why = by_worker((kind for kind, _ in refs), getattr(model, "spec", None))
    if why is not None and not isinstance(model, WorkerModel):
        # A request the worker processes whole (sound; a kind the family's model
        # cannot take preprocessed): the model's own chat template writes its
        # placeholders, as vLLM's chat endpoint has it do.
        from mmctl.prompt.chat import find_template

        template, _ = find_template(model.source)
        if template is None or not model.chat.knows_media(template):
            raise InputError(
                f"{model.source.label} has no chat template that writes media "
                f"({'a text-only one' if template else 'none'}), and mmctl does not know where "
                f"{'sound goes' if sound else 'its media go'} in a {model.name} prompt",
                hint="pass the model's folder with its own chat template (--model-dir DIR)",
            )
        model = model.as_worker(why)
    if not chat and isinstance(model, WorkerModel):
        what = "sound's placeholder text in" if sound else "the placeholder text of"
        raise UsageError(
            f"--no-chat: mmctl does not know {what} a {model.model_type} prompt; "
            "the model's chat template writes it",
            hint="drop --no-chat",
        )
    rendered, ids = render_prompt(
        [kind for kind, _ in refs], prompt, model, system=system, chat=chat,
        allow_special_tokens=allow_special_tokens,
    )  # fmt: skip
    return RequestPlan(
        text=rendered.text,
        input_ids=np.asarray(ids, dtype=np.int64),
        batches=[],
        sampling=sampling or Sampling(),
        stream=stream,
        request_id=request_id or new_request_id(),
        media_refs=list(refs),
    )
