"""The approval workflow's durable state: tables, rows, state tables, the store in parts.

Modules: ``schema`` (the ``approval_*`` tables and their Alembic history in ``schema_versions/``),
``states`` (the execution phases, intent states and dispositions as transition tables),
``records`` (rows as values), ``statements`` (the store's SQL, built once); the store
(:class:`~.store.ApprovalStore`, every transaction of the workflow) in the parts its
collaborators are handed: ``core`` (what every part shares, and the reads), ``admission`` (task
creation), ``retries`` (the owed outcome of a retry without tasks), ``leases`` (the driver's
passes), ``endings`` (the claim, the fence, the finish), ``executions`` (the sealed record each
claim writes before its call runs, which refuses a second run and which ``audit verify``
checks), ``recovery`` (orphans and retention), ``store`` (all of them); ``outcomes`` (the read
API: what happened to the call behind a backend request, for the reviewer surface, notifications
and metrics).

It may import storage, the tasks layer's store and states, the backend contract's value types,
and nothing else of the approval layer. Importing ``schema`` or ``states`` loads neither the store
nor the engine.
"""

__all__: list[str] = []
