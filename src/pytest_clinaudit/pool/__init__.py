"""Pools of game instances built on a Dask cluster, and the cluster itself.

``clinaudit pool build`` builds many instances of a game, one Dask task each,
on an embedded ``distributed.LocalCluster`` or on any running scheduler; the
same bytes come out wherever a task runs. One module per job:

``cluster``
    Dask, imported only here and only when a command asks for a cluster: the
    client (an embedded cluster or a scheduler's address), the environment of
    its workers (one thread, the pool's CPU capability) and the check that
    refuses, by name, a worker whose libraries differ from this machine's.
``task``
    what runs on a worker: one instance built into a scratch folder and
    returned as its files' bytes (no shared filesystem needed), on one thread
    and the pool's capability.
``layout``
    the pool folder: ``<variant>-<seed>/`` (the layout of ``clinaudit build
    --out``), ``journal.jsonl`` (one line per finished or failed instance) and
    ``index.json``.
``run``
    the loop: one task per instance through a ``concurrent.futures`` executor
    (``Client.get_executor()`` on a cluster), each result written and journaled
    as it arrives; Ctrl-C keeps the journal whole.
``progress``
    the live line: done / total, failed, ETA.
"""
