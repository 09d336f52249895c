"""The set-up requests share: the worker's facts, its model files, the tokenizer.

A :class:`Session` is what a :class:`~mmctl.Client` builds on first use and
keeps: every request after it pays nothing for probing or loading. Each step
is a lap of the caller's timeline (``model_files_s``, ``tokenizer_s``; the
client laps ``probe_s``), so the request that paid for the set-up shows it
among its rows.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc

from mmctl.checkpoint.source import ModelSource
from mmctl.choices import Processing
from mmctl.client.bundle import fetch_bundle
from mmctl.client.channel import Target
from mmctl.client.negotiate import ProcessingChoice, choose_processing
from mmctl.client.options import Hooks, SendOptions
from mmctl.client.probe import WorkerFacts
from mmctl.media.probe import MediaKind
from mmctl.models.model import Model, WorkerModel, load_any, with_pruning
from mmctl.models.settings import VisionOverrides
from mmctl.timing import Timeline
from mmctl.values.pruning import VideoPruning


@dataclass
class Session:
    target: Target
    channel: grpc.Channel
    facts: WorkerFacts
    #: The model with its family; a :class:`WorkerModel` where none handles it.
    model: Model | WorkerModel
    #: Where the model files came from, for the result documents.
    model_doc: dict[str, Any]
    _said: set[str] = field(default_factory=set, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def family_model(self) -> Model:
        """The model for mmctl's own preprocessing (replays, tensors): its family's."""
        if isinstance(self.model, WorkerModel):
            raise self.model.unknown
        return self.model

    def processing(
        self,
        opts: SendOptions,
        hooks: Hooks,
        others: Sequence[WorkerFacts] = (),
        sound: bool = False,
        kinds: Collection[MediaKind] = (),
    ) -> ProcessingChoice:
        """Who preprocesses (:func:`~mmctl.client.negotiate.choose_processing`); a
        choice mmctl made by itself is said once per session, not per request.
        ``others``: the facts of more workers the same requests go to (``bench``,
        ``batch``), each of which must be able to take the choice; ``sound``: the
        requests carry sound (processed by the worker, whatever the family); ``kinds``:
        the media kinds they carry, for the kinds the family's model cannot take
        preprocessed (:func:`mmctl.request.refs.by_worker`)."""
        from mmctl.request.refs import by_worker

        model = self.model
        unknown = model.unknown if isinstance(model, WorkerModel) else None
        name = model.model_type if isinstance(model, WorkerModel) else model.spec.name
        why = None if isinstance(model, WorkerModel) else by_worker(kinds, model.spec)
        args = (opts.processing, opts.media_ref, unknown, name, sound, why)
        choice = choose_processing(self.facts, *args)
        for facts in others:
            choose_processing(facts, *args)
        if choice.worker and opts.processing is not Processing.WORKER:
            opts.refuse_client_side(
                "sound is processed by the worker"
                if sound
                else f"{name} requests with these media are processed by the worker"
                if why is not None
                else f"{name} is preprocessed by the worker"
            )
        if choice.note is not None:
            with self._lock:
                new = choice.note not in self._said
                self._said.add(choice.note)
            if new:
                hooks.note(choice.note)
        return choice

    @classmethod
    def open(
        cls,
        target: Target,
        channel: grpc.Channel,
        facts: WorkerFacts,
        *,
        source: ModelSource | None = None,
        model: Model | WorkerModel | None = None,
        source_flag: str = "",
        family: str | None = None,
        vision: VisionOverrides | None = None,
        pruning: VideoPruning | None = None,
        refresh_bundle: bool = False,
        timeline: Timeline | None = None,
    ) -> Session:
        """Get the model files (``source``, else the worker's bundle) and load
        the tokenizer; ``model``: ``source``'s, already loaded."""
        timeline = timeline or Timeline()
        if source is not None:
            origin: dict[str, Any] = {"source": source.label, "from": source_flag}
        else:
            source, bundle = fetch_bundle(channel, target, facts.model, refresh=refresh_bundle)
            origin = {"source": source.label, "from": "worker GetTokenizer", "bundle": bundle}
        loaded_here = model is None
        if model is None:
            model = with_pruning(load_any(source=source, family=family, overrides=vision), pruning)
        timeline.lap("model_files_s")
        if loaded_here and isinstance(model, Model):
            timeline.rebook(model.tokenizer_load_s, "model_files_s", "tokenizer_s")
        model.tokenizer  # noqa: B018 - loading it is set-up, not a request's tokenize time
        timeline.lap("tokenizer_s")
        family_name = None if isinstance(model, WorkerModel) else model.spec.name
        origin.update(family=family_name, served_model_name=facts.model.served_model_name)
        if isinstance(model, WorkerModel):
            origin["model_type"] = model.model_type
        return cls(target, channel, facts, model, origin)
