"""Where vLLM's ``recompute_mrope_positions`` writes a pruned Qwen3-VL video's
positions, with and without the prompt's outer ``<|vision_start|>`` (the
evidence of docs/pruning.md, "Qwen3-VL pruning dies in vLLM itself").

Run in the engine environment (no model, seconds):

    ~/.cache/mmctl/engine-env-*/bin/python scripts/engine/mrope_start.py

A synthetic span of two frames, EVS-style (all kept pads in the first frame's
block), each frame's time ``k`` tokens, and the model's five position channels
``[t, h, w, is_vision_start, is_video]`` as ``_get_expanded_positions`` lays
them out (channels 3 and 4 are what the function reads; t/h/w step by 2 here
so the run it writes shows). Without the outer pair (the old processors'
layout) the run lands on the span; with it (vLLM's own with transformers
>= 5.10) it lands ``k + 1`` tokens early, or the call raises when fewer than
``k + 1`` tokens precede the video.
"""

from __future__ import annotations

import torch
from vllm.multimodal.video_prune.evs import recompute_mrope_positions

VS, VE, IMG, VID = 151652, 151653, 151655, 151656
K = 4  # tokens of a frame's "<0.5 seconds>"
TIME = [7] * K
SPAN = [*TIME, VS, VID, VID, VE, *TIME, VS, VE]


def channels() -> torch.Tensor:
    pos = torch.zeros(5, len(SPAN), dtype=torch.long)
    pos[0:3] = torch.arange(len(SPAN)) * 2
    for i, token in enumerate(SPAN):
        pos[3, i] = int(token == VS)
        pos[4, i] = int(token == VID)
    return pos


def where(prefix: int, outer: bool) -> str:
    ids = list(range(1, prefix + 1)) + [VS] * outer + SPAN + [VE] * outer + [5, 6]
    start = prefix + outer
    mrope = torch.arange(len(ids)).expand(3, len(ids)).clone()
    try:
        out, _ = recompute_mrope_positions(torch.tensor(ids), [channels()], mrope, 0, VS, IMG, VID)
    except RuntimeError as err:
        return f"RuntimeError: {str(err).splitlines()[0]}"
    t = out[0].tolist()
    steps = [i for i in range(1, len(t)) if t[i] - t[i - 1] == 2]
    return f"span at {start}..{start + len(SPAN) - 1}, written at {steps[0] - 1}..{steps[-1]}"


if __name__ == "__main__":
    for outer in (False, True):
        for prefix in (3, 20):
            print(f"outer <|vision_start|> {'yes' if outer else 'no '}, {prefix:2} tokens before: "
                  f"{where(prefix, outer)}")  # fmt: skip
