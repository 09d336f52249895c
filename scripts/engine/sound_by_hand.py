"""The sound cases of the engine check with a media_refs request built by hand.

    .venv/bin/python scripts/engine/sound_by_hand.py --engine-python ENV/bin/python \\
        --cache ~/.cache/mmctl --family gemma4-audio [--json OUT]

Before mmctl sends sound itself, this runs ``check.py``'s driver with mmctl's
request replaced by one written here from ``mmctl.wire.proto``: the prompt is
the model folder's chat template (``chat_template.jinja``) rendered with one
``{"type": "audio"}`` or ``{"type": "image"}`` part per medium, then the
prompt text, tokenized by the folder's tokenizer, and each medium a
``media_refs`` item (``data:`` URL of the file's bytes, or its ``file://``
URL). The reference is unchanged: vLLM's offline ``LLM.chat`` with OpenAI
content parts (offline.py). So it shows whether a worker-processed request of
this shape gives what vLLM's own chat gives — the wire and the worker, not
mmctl's own rendering.
"""

from __future__ import annotations

import base64
import json
import mimetypes
import sys
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import check  # noqa: E402
from families import is_audio  # noqa: E402


def hand_request(model: Path, media: list[Path], ref: str, prompt: str) -> Any:
    """The GenerateRequest, written by hand: the folder's chat template, its
    tokenizer, one media_refs item per medium (``ref``: "data" or "file")."""
    from tokenizers import Tokenizer
    from transformers.utils.chat_template_utils import render_jinja_template

    from mmctl.wire import proto

    common, engine = proto.common_pb2, proto.engine_pb2
    config = json.loads((model / "tokenizer_config.json").read_text())
    specials = {k: config[k] for k in ("bos_token", "eos_token", "pad_token") if k in config}
    parts: list[dict[str, str]] = [
        {"type": "audio" if is_audio(str(m)) else "image"} for m in media
    ]
    messages = [{"role": "user", "content": [*parts, {"type": "text", "text": prompt}]}]
    rendered, _ = render_jinja_template(
        conversations=[messages],
        chat_template=(model / "chat_template.jinja").read_text(),
        add_generation_prompt=True,
        **specials,
    )
    text = rendered[0]
    ids = (
        Tokenizer.from_file(str(model / "tokenizer.json"))
        .encode(text, add_special_tokens=False)
        .ids
    )
    refs = []
    for path in media:
        if ref == "file":
            url = path.resolve().as_uri()
        else:
            kind = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
            url = f"data:{kind};base64," + base64.b64encode(path.read_bytes()).decode()
        modality = common.AUDIO if is_audio(str(path)) else common.IMAGE
        refs.append(engine.MediaRef(modality=modality, url=url))
    req = engine.GenerateRequest(
        request_id=f"by-hand-{uuid.uuid4().hex[:12]}",
        tokenized=engine.TokenizedInput(original_text=text, input_ids=ids),
        sampling_params=engine.SamplingParams(temperature=0.0, max_tokens=check.MAX_TOKENS),
        media_refs=engine.MediaRefs(items=refs),
    )
    check._ask_logprobs(req)
    return req


def main() -> int:
    models: dict[str, Path] = {}
    new_slot = check.new_slot

    def remember_model(family: Any, worker: Any, *args: Any) -> Any:
        slot = new_slot(family, worker, *args)
        models["model"] = slot.model
        return slot

    def by_hand(self: Any, media: list[Path], **options: Any) -> Any:
        ref = options.get("media_ref", "data")
        return hand_request(models["model"], media, ref, check.PROMPT)

    def kinds(media: list[Path]) -> list[str]:
        return ["audio" if is_audio(str(p)) else "image" for p in media]

    check.new_slot = remember_model
    check.Sender._worker_request = by_hand
    check._kinds = kinds
    return check.main()


if __name__ == "__main__":
    sys.exit(main())
