"""Creating approval tasks: a requestable denial's call becomes a durable approval request (SEP-2848).

Modules: ``requestable`` (:class:`~.requestable.RequestableCall`: the call as the gate and the
approval service learned it, the one value creation takes), ``steps``
(:class:`~.steps.TaskCreation`: the request drafted once, then admission, intent, submission,
handle and task, crash-consistently, or all in one transaction; the submission inputs asked
first), ``answers`` (what the creating call is answered: its task, an identical call's task, a
refusal naming its limit).

Creation calls down into ``approval.engine`` (the driver, a request's values),
``approval.persistence`` and the top of the approval layer (gate, binding, options, messages,
results, ``url_approval``); it never imports ``approval.service`` or ``approval.without_tasks``:
it returns what admission said, and the answers to clients without tasks are chosen above it.
"""

__all__: list[str] = []
