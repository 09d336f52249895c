"""``mmctl batch``: a dataset through a fleet of workers, resumable, locally or on Ray (ARCHITECTURE §9).

Modules, in the order an item flows: :mod:`~mmctl.run_batch.work` (a
dataset line → a prepared request, in a worker process or a Ray task;
picklable settings), :mod:`~mmctl.run_batch.fleet` (sending to several
targets: health probes, the least busy, retries elsewhere),
:mod:`~mmctl.run_batch.output` (the OpenAI batch output lines, resume),
the engines :mod:`~mmctl.run_batch.local` and :mod:`~mmctl.run_batch.ray_engine`,
and :mod:`~mmctl.run_batch.api` (``mmctl.batch``).
"""
