"""Prompt text: the model's multimodal chat template when it has one, else the built-in format."""

from __future__ import annotations

from mmctl.checkpoint import source
from mmctl.media.probe import MediaKind
from mmctl.models.model import load_model
from mmctl.prompt.chat import render

TEMPLATE = """{%- for m in messages -%}<|im_start|>{{ m.role }}
{% for c in m.content -%}
{%- if c.type == 'video' -%}<|vision_start|><|video_pad|><|vision_end|>
{%- elif c.type == 'image' -%}<|vision_start|><|image_pad|><|vision_end|>
{%- else -%}{{ c.text }}{%- endif -%}
{%- endfor %}<|im_end|>
{% endfor -%}{%- if add_generation_prompt -%}<|im_start|>assistant
{% endif -%}"""


def _render(model, parts, **kw):
    return render(
        parts,
        model.tokenizer,
        model.source,
        model.chat,
        system=kw.get("system"),
        chat=kw.get("chat", True),
    )


def test_builtin_format_when_the_template_is_text_only(builtin_model):
    out = _render(builtin_model, [MediaKind.VIDEO, "Hi?"])
    assert out.text == (
        "<|im_start|>user\n<|vision_start|><|video_pad|><|vision_end|>Hi?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert "built-in" in out.how and "text-only" in out.how


def test_a_multimodal_template_is_rendered(tmp_path):
    for path in source.builtin().files().values():
        (tmp_path / path.name).write_bytes(path.read_bytes())
    (tmp_path / "chat_template.jinja").write_text(TEMPLATE)
    model = load_model(model_dir=tmp_path)
    out = _render(model, [MediaKind.IMAGE, MediaKind.VIDEO, "Compare."], system="Be brief.")
    assert out.how == "chat template (chat_template.jinja)"
    assert out.text == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n"
        "<|vision_start|><|image_pad|><|vision_end|><|vision_start|><|video_pad|><|vision_end|>"
        "Compare.<|im_end|>\n<|im_start|>assistant\n"
    )


def test_no_chat_and_qwen25_default_system(builtin_model):
    raw = _render(builtin_model, [MediaKind.IMAGE, "x"], chat=False)
    assert raw.text == "<|vision_start|><|image_pad|><|vision_end|>x"
    qwen25 = load_model(family="qwen2.5-vl")
    assert qwen25.params.patch_size == 14  # the qwen3 configs do not leak into a forced family
    out = _render(qwen25, ["x"])
    assert out.text.startswith("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n")
