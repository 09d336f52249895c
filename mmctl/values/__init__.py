"""The value types every layer above media shares: what one media item became
(:mod:`.items`), a laid-out prompt and its check (:mod:`.layout`), a family's
special ids (:mod:`.tokens`), a modality batch's tensors (:mod:`.fields`) and a
received batch's contract error (:mod:`.received`).

They import nothing above :mod:`mmctl.media`, so preprocessing, prompt,
models, request and the worker all speak them without importing one another
(ARCHITECTURE §1; ``tests/unit/test_layers.py`` holds it).
"""
