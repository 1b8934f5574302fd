"""What a ``tools/call`` may carry into the approval layer, and how it is read.

Modules: ``limits`` (what one caller may make the server parse: the body limit on ``/mcp`` and
the limits on a call's arguments), ``input_schema`` (a call's arguments against the input schema
its tool lists), ``inputs`` (the submission inputs a requester supplies for its approvers, in an
MRTR form round or in its task, and the ``requestState`` that ties a round to its call).

The policy gate checks the first two before policy sees a call; creation and the workflow driver
read the third. It may import the binding, the options and the messages of the approval layer, and
nothing else of it.
"""

__all__: list[str] = []
