"""Inkling: the family's own functions against the committed goldens, its chat format,
and its settings, ids and refusals on folders changed one value at a time.

Every ``inkling-*`` golden of tests/fixtures/families/goldens/ is vLLM 0.33's own code
(``_rescale_image``, ``render_inkling_messages``, read from the released wheel) on
transformers 5.20.2's ``InklingProcessor`` (scripts/families/inkling_golden.py). mmctl's
pixels of each image (loaded as vLLM loads it) must have the golden's bytes, its sizes
and patch counts the golden's, and mmctl's chat text, tokenized, the renderer's ids.
The whole request goes through mmctl's real path in
tests/compat/test_family_requests.py. Torch-free.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from mmctl.errors import InputError
from mmctl.media.image import load_image
from mmctl.media.probe import MediaKind
from mmctl.models import inkling, registry
from mmctl.models.inkling import Vision
from mmctl.models.model import load_model
from mmctl.prompt.layout import replace_placeholders
from mmctl.values.items import ItemFacts

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
FOLDER = FIXTURES / "families" / "inkling"
GOLDENS = sorted((FIXTURES / "families" / "goldens").glob("inkling-*.npz"))


def _golden(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


def _images(record: dict[str, np.ndarray]) -> list[np.ndarray]:
    return [load_image(FIXTURES / "media" / name)[1] for name in record["media"].tolist()]


def test_the_published_folder_is_the_family_with_its_published_values() -> None:
    model = load_model(model_dir=FOLDER)
    assert model.spec is inkling.FAMILY
    assert model.params == Vision()  # every value the published one
    assert model.warnings == ()
    assert model.token_ids.as_dict() == {"image_bos_token_id": 200005, "image_token_id": 200054}
    assert model.spec.modalities == (MediaKind.IMAGE,)
    assert registry.for_config({"model_type": "inkling_mm_model"}) is inkling.FAMILY
    # The text-only model type reads no media: not this family.
    assert not inkling.FAMILY.matches({"model_type": "inkling_model"})


def test_the_goldens_are_every_image_case_and_two_images() -> None:
    assert len(GOLDENS) == 10
    assert {g.stem for g in GOLDENS} >= {"inkling-two_images", "inkling-image-large"}


@pytest.mark.parametrize("golden", GOLDENS, ids=[g.stem for g in GOLDENS])
def test_pixels_sizes_and_counts_are_the_goldens(golden: Path) -> None:
    record, vision = _golden(golden), Vision()
    images = _images(record)
    assert [list(i.shape[:2]) for i in images] == record["image_sizes_hw"].tolist()
    sizes = [inkling.scaled_size(*i.shape[:2], vision) for i in images]
    assert [list(s) for s in sizes] == record["resized_hw"].tolist()
    patches = [inkling.image_patches(i, vision) for i in images]
    counts = [p.shape[0] for p in patches]
    assert counts == record["num_patches_full"].tolist()
    assert counts == [int(np.prod(inkling.patch_grid(*s, 40))) for s in sizes]
    pixels = np.ascontiguousarray(np.concatenate(patches), dtype=np.float32)
    assert list(pixels.shape) == record["pixel_values_shape"].tolist()
    assert hashlib.sha256(pixels.tobytes()).hexdigest() == str(record["pixel_values_sha256"])


@pytest.mark.parametrize("golden", GOLDENS, ids=[g.stem for g in GOLDENS])
def test_the_chat_format_is_the_renderers_and_the_expansion_vllms(golden: Path) -> None:
    record = _golden(golden)
    model = load_model(model_dir=FOLDER)
    body = inkling.MARKER_TEXT * len(record["media"]) + str(record["prompt"])
    text = inkling.chat_format(body, None)
    assert text == str(record["text"])
    ids = model.tokenizer.encode(text)
    assert ids == record["template_ids"].tolist()
    items = [ItemFacts(MediaKind.IMAGE, int(n), rows=int(n)) for n in record["num_patches_full"]]
    layout = replace_placeholders(
        ids, items, model.token_ids, lambda item: inkling.replacement(item, model)
    )
    assert list(layout.ids) == record["vllm_input_ids"].tolist()
    # The marker opens each span; only the image tokens take embeddings.
    for span, item in zip(layout.spans, items, strict=True):
        run = layout.ids[span.offset : span.end]
        assert run[0] == 200005 and int(np.count_nonzero(run == 200054)) == item.tokens


def test_the_chat_format_frames_each_part_as_vllms_renderer_does() -> None:
    m = inkling.MARKER_TEXT
    text = inkling.chat_format(f"Look:{m}and{m}", "Be brief.")
    assert text == (
        "<|message_system|><|content_text|>Be brief.<|end_message|>"
        "<|message_system|><|content_text|>Thinking effort level: 0.9<|end_message|>"
        "<|message_user|><|content_text|>Look:<|end_message|>"
        f"<|message_user|>{m}<|end_message|>"
        "<|message_user|><|content_text|>and<|end_message|>"
        f"<|message_user|>{m}<|end_message|>"
        "<|message_model|>"
    )
    # No template is ever the model's: vLLM renders Inkling prompts itself.
    assert not inkling.FAMILY.prompt.knows_media("{{ '<|content_image|>' }}")


def test_the_patch_grid_always_has_one_more_column() -> None:
    # divide_to_patches: W // P + 1 columns, ceil(H / P) rows.
    assert inkling.patch_grid(80, 80, 40) == (2, 3)
    assert inkling.patch_grid(81, 79, 40) == (3, 2)
    assert inkling.patch_grid(1, 1, 40) == (1, 1)


def test_scaling_doubles_and_the_cap_limits_only_growth() -> None:
    vision = Vision()
    assert inkling.scaled_size(61, 97, vision) == (122, 194)
    assert inkling.scaled_size(900, 1400, vision) == (1317, 2048)  # capped at 2048
    assert inkling.scaled_size(1000, 3000, vision) == (1000, 3000)  # above the cap: as is
    # floor(d * ratio + 0.5): half up, as vLLM's _rescale_image.
    assert inkling.scaled_size(3, 1200, vision) == (5, 2048)


def _folder_with(tmp_path: Path, file: str, key: str, value: object) -> Path:
    folder = tmp_path / "model"
    shutil.copytree(FOLDER, folder)
    path = folder / file
    data = json.loads(path.read_text())
    *parents, last = key.split(".")
    node = data
    for part in parents:
        node = node[part]
    if value is None:
        node.pop(last)
    else:
        node[last] = value
    path.write_text(json.dumps(data))
    return folder


def test_a_folders_own_scaling_is_read(tmp_path: Path) -> None:
    folder = _folder_with(
        tmp_path, "processor_config.json", "image_processor.rescale_image_frac", 1.0
    )
    model = load_model(model_dir=folder)
    assert model.params.rescale_image_frac == 1.0
    assert inkling.scaled_size(61, 97, model.params) == (61, 97)


@pytest.mark.parametrize(
    ("file", "key", "value", "message"),
    [
        ("processor_config.json", "image_processor.do_resize", False, "only with true"),
        ("processor_config.json", "image_processor.size", {"height": 32, "width": 32}, "40"),
        ("processor_config.json", "image_processor.rescale_image_frac", 0, "above 0"),
        ("config.json", "vision_config.decoder_dmodel", None, "decoder_dmodel"),
        ("config.json", "vision_config.temporal_patch_size", 4, "two|2"),
    ],
)
def test_a_folder_vllm_cannot_serve_images_with_is_refused(
    tmp_path: Path, file: str, key: str, value: object, message: str
) -> None:
    folder = _folder_with(tmp_path, file, key, value)
    with pytest.raises(InputError, match=message):
        load_model(model_dir=folder)


def test_a_tokenizer_whose_marker_is_not_vllms_constant_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    shutil.copytree(FOLDER, folder)
    tok = json.loads((folder / "tokenizer.json").read_text())
    for entry in tok["added_tokens"]:
        if entry["content"] == "<|content_image|>":
            entry["content"] = "<|content_picture|>"
    vocab = tok["model"]["vocab"]  # the specials are in the vocabulary too, at their ids
    vocab["<|content_picture|>"] = vocab.pop("<|content_image|>")
    (folder / "tokenizer.json").write_text(json.dumps(tok))
    with pytest.raises(InputError, match="has no <\\|content_image\\|>"):
        load_model(model_dir=folder)
