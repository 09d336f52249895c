"""Inkling goldens: vLLM 0.33's own Inkling code, run on transformers' ``InklingProcessor``.

Imported by scripts/make_family_fixtures.py (reference environment: torch,
transformers 5.20.2). vLLM itself does not install there, so the functions vLLM
0.33 runs are read from the released wheel at run time — never copied into this
repository: ``$MMCTL_VLLM_SRC`` names a folder holding the unzipped
``vllm==0.33.0`` wheel (``pip download --no-deps vllm==0.33.0``, ``unzip``).
From it, by name (``ast``):

- ``vllm/models/inkling/common/mm_preprocess.py``: ``_rescale_image`` (PIL
  LANCZOS, long edge x ``rescale_image_frac``), ``DEFAULT_RESCALE_IMAGE_FRAC``,
  ``IMAGE_MARKER_ID``, ``IMAGE_TOKEN_ID``;
- ``vllm/renderers/inkling_encoding.py``: the whole module (it imports nothing of
  vLLM): ``render_inkling_messages``, the chat renderer vLLM uses for Inkling in
  place of a chat template;
- ``vllm/renderers/inkling.py``: ``_resolve_reasoning_effort`` and its table (the
  default effort 0.9 when a request names none).

What is this script's own (scripts/families/inkling.md, with line numbers): the
adapter the renderer calls (``_HfBackedTmlTokenizer``'s two methods: special ids
from the vocabulary by the module's spellings, text by ``encode(...,
add_special_tokens=False)``), the calls in ``_apply_hf_processor_main``'s image
branch, and ``PromptReplacement``'s effect (each ``IMAGE_MARKER_ID`` in order
becomes the marker and ``num_patches`` image tokens).
"""

from __future__ import annotations

import ast
import hashlib
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from families.vllm_source import vllm_source as _vllm_source

MM_PREPROCESS = "vllm/models/inkling/common/mm_preprocess.py"
ENCODING = "vllm/renderers/inkling_encoding.py"
RENDERER = "vllm/renderers/inkling.py"


def vllm_source() -> Path:
    return _vllm_source(MM_PREPROCESS)


def _pick(path: Path, names: set[str], namespace: dict[str, Any]) -> dict[str, Any]:
    """Execute only the top-level definitions ``names`` of ``path`` in ``namespace``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    body = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name in names:
            body.append(node)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id in names for t in targets):
                body.append(node)
    found = {n.name if hasattr(n, "name") else None for n in body}
    module = ast.Module(body=body, type_ignores=[])
    exec(compile(module, str(path), "exec"), namespace)
    missing = [n for n in names if n not in namespace]
    assert not missing, (path, missing, found)
    return namespace


def vllm_code() -> dict[str, Any]:
    from PIL import Image

    src = vllm_source()
    code = _pick(
        src / MM_PREPROCESS,
        {"_rescale_image", "DEFAULT_RESCALE_IMAGE_FRAC", "IMAGE_MARKER_ID", "IMAGE_TOKEN_ID"},
        {"math": math, "Image": Image},
    )
    encoding: dict[str, Any] = {"__name__": "inkling_encoding"}
    exec(
        compile((src / ENCODING).read_text(encoding="utf-8"), str(src / ENCODING), "exec"), encoding
    )
    renderer = _pick(
        src / RENDERER,
        {"_resolve_reasoning_effort", "_NAMED_REASONING_EFFORT", "_DEFAULT_REASONING_EFFORT"},
        {},
    )
    return {
        **code,
        **renderer,
        "render": encoding["render_inkling_messages"],
        "spellings": encoding["SPECIAL_TOKEN_SPELLINGS"],
    }


class Adapter:
    """``vllm/renderers/inkling.py`` ``_HfBackedTmlTokenizer``: special ids from the
    vocabulary (the first spelling found), text without special tokens."""

    def __init__(self, tokenizer: Any, spellings: dict[str, tuple[str, ...]]) -> None:
        self._tokenizer = tokenizer
        vocab = tokenizer.get_vocab()
        self._ids = {}
        for token, names in spellings.items():
            ids = [vocab[n] for n in names if n in vocab]
            assert ids, f"the tokenizer lacks {token}"
            self._ids[token] = ids[0]

    def encode_text(self, text: str) -> list[int]:
        return self._tokenizer.encode(text, add_special_tokens=False)

    def encode_special(self, token: str) -> int:
        return self._ids[token]


def golden(
    processor: Any,
    paths: list[Path],
    prompt: str,
    load_image: Callable[[Path], Any],
    tensor_record: Callable[[str, np.ndarray, dict], None],
) -> dict:
    import torch

    code = vllm_code()
    images = [load_image(p) for p in paths]  # vLLM's ImageMediaIO: EXIF, RGB on white
    sizes_hw = [(im.height, im.width) for im in images]

    # _apply_hf_processor_main, the image branch (mm_preprocess.py)
    image_processor = processor.image_processor
    frac = image_processor.rescale_image_frac or code["DEFAULT_RESCALE_IMAGE_FRAC"]
    max_long_edge = image_processor.rescale_image_max_upscaled_long_edge
    images = [code["_rescale_image"](im, frac, max_long_edge) for im in images]
    resized_hw = [(im.height, im.width) for im in images]
    features = image_processor(images, rescale_image_frac=None, return_tensors="pt")
    pixel_values = features["pixel_values"].to(torch.bfloat16)
    num_patches = features["num_patches"].to(torch.int64)

    # InklingRenderer._render: one user message, its parts in order, default effort.
    content = [{"type": "image_url", "image_url": {"url": f"file://{p.name}"}} for p in paths]
    content.append({"type": "text", "text": prompt})
    messages = [{"role": "user", "content": content}]
    effort = code["_resolve_reasoning_effort"](None)
    adapter = Adapter(processor.tokenizer, code["spellings"])
    rendered = code["render"](
        messages, adapter, add_generation_prompt=True, tools=None, reasoning_effort=effort
    )

    # _get_prompt_updates: PromptReplacement(target=[IMAGE_MARKER_ID]) per image, in order.
    marker, token = code["IMAGE_MARKER_ID"], code["IMAGE_TOKEN_ID"]
    assert rendered.count(marker) == len(paths), rendered
    ids: list[int] = []
    item = 0
    for tid in rendered:
        if tid == marker:
            ids += [marker] + [token] * int(num_patches[item])
            item += 1
        else:
            ids.append(tid)

    record: dict[str, Any] = {
        "prompt": np.asarray(prompt),
        "text": np.asarray(processor.tokenizer.decode(rendered)),
        "template_ids": np.asarray(rendered, dtype=np.int64),
        "input_ids": np.asarray(ids, dtype=np.int64),
        "vllm_input_ids": np.asarray(ids, dtype=np.int64),
        # No HF expansion runs under vLLM (it builds the ids itself): one list.
        "vllm_equals_hf": np.asarray(True),
        "media": np.asarray([p.name for p in paths]),
        "media_sha256": np.asarray([hashlib.sha256(p.read_bytes()).hexdigest() for p in paths]),
        "image_sizes_hw": np.asarray(sizes_hw, dtype=np.int64),
        "resized_hw": np.asarray(resized_hw, dtype=np.int64),
        "reasoning_effort": np.asarray(float(effort)),
        "vllm_marker_id": np.asarray(marker, dtype=np.int64),
        "vllm_embed_id": np.asarray(token, dtype=np.int64),
        "pixel_values_source_dtype": np.asarray(str(pixel_values.dtype)),
    }
    tensor_record("pixel_values", pixel_values.to(torch.float32).numpy(), record)
    tensor_record("num_patches", num_patches.numpy(), record)
    return record
