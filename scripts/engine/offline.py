"""The offline reference: vLLM's own processing through ``vllm.LLM.generate`` (engine environment).

    ENV/bin/python scripts/engine/offline.py JOB.json OUT.json

JOB: ``{"engine": {EngineArgs fields}, "max_tokens", "top_k", "cases": [{"name",
"media": [paths], "prompt_ids": [unexpanded prompt ids]}]}``. Each case's media
are loaded by vLLM's media connector from ``file://`` URLs — videos with the
model's video processor named, as the serving path does (without it vLLM
pre-samples 32 frames) — and generated greedily from the unexpanded prompt ids,
which vLLM's processor expands. OUT: per case, output ids, logprobs and prompt
logprobs in the shape the servicer puts them on the wire (top-k = the first k
entries of vLLM's logprob dict).

A case with ``"chat": PROMPT`` and ``"forms"`` (the sound cases) is vLLM's
own prompt rendering too: ``LLM.chat`` with one user turn of OpenAI content
parts — each medium in order, then the prompt text — so the model's chat
template, the tokenizer, the audio loader and the processor are all vLLM's.
One run per form: ``"input_audio"`` (base64 data; images as ``data:`` URLs)
and ``"audio_url"`` (``file://`` URLs, under the engine's
``allowed_local_media_path``), each written as ``"NAME FORM"``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from families import is_audio

VIDEO_SUFFIXES = (".mp4", ".mov", ".webm", ".mkv", ".gif", ".ts", ".avi")


def _top(entry: dict[int, Any] | None, k: int) -> list[list[float]]:
    if not entry:
        return []
    return [[tid, lp.logprob] for tid, lp in list(entry.items())[:k]]


def _outcome(out: Any, k: int) -> dict[str, Any]:
    """One RequestOutput as the servicer puts it on the wire."""
    comp = out.outputs[0]
    ids = list(comp.token_ids)
    prompt_ids = list(out.prompt_token_ids or [])
    return {
        "output_ids": ids,
        "output_logprobs": [
            e[t].logprob for t, e in zip(ids, comp.logprobs or [], strict=False) if t in e
        ],
        "output_top": [
            _top(e, k) for t, e in zip(ids, comp.logprobs or [], strict=False) if t in e
        ],
        "prompt_ids": prompt_ids,
        "prompt_logprobs": [
            (e[t].logprob if e is not None and t in e else None)
            for t, e in zip(prompt_ids, out.prompt_logprobs or [], strict=False)
        ],
        "prompt_top": [_top(e, k) for e in (out.prompt_logprobs or [])],
        "finish_reason": comp.finish_reason or "",
    }


def chat_part(path: str, form: str) -> dict[str, Any]:
    """One medium as an OpenAI chat content part, in ``form`` ("input_audio" or "audio_url")."""
    import base64
    import mimetypes

    file = Path(path).resolve()
    if form == "audio_url":
        url = file.as_uri()
    else:
        data = base64.b64encode(file.read_bytes()).decode("ascii")
        if is_audio(path):
            fmt = file.suffix.lower().lstrip(".")
            return {"type": "input_audio", "input_audio": {"data": data, "format": fmt}}
        url = f"data:{mimetypes.guess_type(file.name)[0]};base64,{data}"
    kind = "audio_url" if is_audio(path) else "image_url"
    return {"type": kind, kind: {"url": url}}


def chat_messages(media: list[str], prompt: str, form: str) -> list[dict[str, Any]]:
    """One user turn: each medium in order, then the prompt (mmctl's order)."""
    parts = [chat_part(m, form) for m in media]
    return [{"role": "user", "content": [*parts, {"type": "text", "text": prompt}]}]


def main(job_path: Path, out_path: Path) -> None:
    from vllm import LLM, SamplingParams
    from vllm.multimodal.media.connector import MediaConnector
    from vllm.transformers_utils.processor import get_video_processor_cls_name

    job = json.loads(job_path.read_text())
    k = int(job["top_k"])
    llm = LLM(**job["engine"])
    model_config = llm.llm_engine.model_config
    video_processor = get_video_processor_cls_name(model_config)
    print(f"offline: video processor {video_processor}", file=sys.stderr)
    connector = MediaConnector(allowed_local_media_path="/")
    params = SamplingParams(
        temperature=0.0, max_tokens=int(job["max_tokens"]), logprobs=k, prompt_logprobs=k
    )
    results: dict[str, Any] = {}
    for case in job["cases"]:
        if "chat" in case:
            for form in case["forms"]:
                messages = chat_messages(case["media"], case["chat"], form)
                (out,) = llm.chat(messages, params, use_tqdm=False)
                name = f"{case['name']} {form}"
                results[name] = _outcome(out, k)
                print(
                    f"offline: {name}: {len(results[name]['prompt_ids'])} prompt tokens, "
                    f"output {results[name]['output_ids']}",
                    file=sys.stderr,
                )
            continue
        data: dict[str, list[Any]] = {}
        for path in case["media"]:
            url = Path(path).resolve().as_uri()
            if path.lower().endswith(VIDEO_SUFFIXES):
                media = connector.fetch_video(url, video_processor=video_processor)
                data.setdefault("video", []).append(media)
            else:
                data.setdefault("image", []).append(connector.fetch_image(url))
        prompt = {"prompt_token_ids": case["prompt_ids"], "multi_modal_data": data}
        (out,) = llm.generate([prompt], params, use_tqdm=False)
        results[case["name"]] = _outcome(out, k)
        ids = results[case["name"]]["output_ids"]
        prompt_ids = results[case["name"]]["prompt_ids"]
        print(
            f"offline: {case['name']}: {len(prompt_ids)} prompt tokens, output {ids}",
            file=sys.stderr,
        )
    out_path.write_text(json.dumps(results))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
