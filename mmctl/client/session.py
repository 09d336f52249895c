"""The set-up requests share: the worker's facts, its model files, the tokenizer.

A :class:`Session` is what a :class:`~mmctl.Client` builds on first use and
keeps: every request after it pays nothing for probing or loading. Each step
is a lap of the caller's timeline (``model_files_s``, ``tokenizer_s``; the
client laps ``probe_s``), so the request that paid for the set-up shows it
among its rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import grpc

from mmctl.checkpoint.source import ModelSource
from mmctl.client.bundle import fetch_bundle
from mmctl.client.channel import Target
from mmctl.client.probe import WorkerFacts
from mmctl.models.model import Model, load_model
from mmctl.models.settings import VisionOverrides
from mmctl.timing import Timeline


@dataclass
class Session:
    target: Target
    channel: grpc.Channel
    facts: WorkerFacts
    model: Model
    #: Where the model files came from, for the result documents.
    model_doc: dict[str, Any]

    @classmethod
    def open(
        cls,
        target: Target,
        channel: grpc.Channel,
        facts: WorkerFacts,
        *,
        source: ModelSource | None = None,
        model: Model | None = None,
        source_flag: str = "",
        family: str | None = None,
        vision: VisionOverrides | None = None,
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
        if model is None:
            model = load_model(source=source, family=family, overrides=vision)
        timeline.lap("model_files_s")
        model.tokenizer  # noqa: B018 - loading it is set-up, not a request's tokenize time
        timeline.lap("tokenizer_s")
        origin.update(family=model.spec.name, served_model_name=facts.model.served_model_name)
        return cls(target, channel, facts, model, origin)
