"""Following an approval to its end: the workflow driver, re-evaluation, the claim, the execution.

Modules: ``driver`` (:class:`~.driver.WorkflowDriver`: decides when each pending approval is
looked at, and reconciles crash leftovers), ``progress`` (:class:`~.progress.WorkflowProgress`:
one look at a request's backend state and what follows, the re-evaluation of an approved call
included), ``dependencies`` (the one value its parts receive), ``requests`` (a new request's
submission, intent and task rows), ``resubmission`` (chained requests, intents a crash left in
flight), ``run_once`` (the single claim and the one run of an approved call), ``changes``
(following a backend's change feed).

It may import ``approval.persistence`` and the top of the approval layer (binding, options,
tools, messages, results), the backends, policy, denials, tasks and storage; never
``approval.service``, ``approval.without_tasks`` or anything above the approval layer.
"""

__all__: list[str] = []
