"""The Qwen-VL families (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Qwen3.5): patchified
pixels with a ``(t, h, w)`` grid, ``<|vision_start|>`` / ``<|vision_end|>``
around each placeholder, and vLLM's mrope walk over the laid-out prompt.

:mod:`.settings` declares their processor settings and token ids,
:mod:`.pipeline` turns media into patch rows, :mod:`.layout` expands the
prompt, :mod:`.parts` is the family interface they share; :mod:`.qwen3_vl`
and :mod:`.qwen2_vl` hold what differs (sizes, sampling, frame times, the
per-video tensors) and declare the families.
"""
