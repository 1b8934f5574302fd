"""Approval for clients that did not declare tasks (``without_tasks = "request"``).

Modules: ``flow`` (:class:`~.flow.WithoutTasksFlow`: open or join a request through task
creation, hand its outcome to the identical retry once, read-your-decision), ``answers`` (what
such a client reads), ``links`` (the URL rounds of ``requester_url`` on 2026-07-28 and
2025-11-25), ``requester_page`` (the page the requester follows in a browser).

It may import ``approval.creation`` (which opens its requests and says what admission found),
``approval.persistence``, the top of the approval layer (binding, options, results), denials,
policy, tasks and storage; never ``approval.service`` or ``approval.engine``.
"""

__all__: list[str] = []
