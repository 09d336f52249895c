"""``mmctl bench``: a load tester for ``vllm.grpc.engine.VllmEngine`` (ARCHITECTURE §8).

Modules, in the order the data flows: :mod:`~mmctl.bench.workload` (what is
sent: clips, a dataset, synthetic sizes — :mod:`~mmctl.bench.synthetic`),
:mod:`~mmctl.bench.schedule` (which arm when: interleaved, seeded, Poisson or
gamma arrivals), :mod:`~mmctl.bench.runner` (requests on ``grpc.aio``, one
record each), :mod:`~mmctl.bench.floors` (the machine's floors, same run),
:mod:`~mmctl.bench.stats` and :mod:`~mmctl.bench.report` (vLLM's metric
names, ratios with bootstrap intervals), :mod:`~mmctl.bench.plot`.
"""
