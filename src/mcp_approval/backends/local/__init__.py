"""The local approval backend: requests kept in the server's own database, decided by its reviewers.

Its public names are :mod:`mcp_approval.backends`' (``LocalApprovalBackend``, ``ApprovalTemplate``,
``ApprovalRecord``, ``RuleResolver``, …); nothing outside :mod:`mcp_approval.backends` imports
these modules, except ``schema`` (the tables and their history, as every layer's schema module).

The modules, each with one job:

- ``backend``: :class:`~mcp_approval.backends.LocalApprovalBackend`, which builds the parts below
  once and answers the backend contract and the reviewer operations through them;
- ``queue``: opening requests, finding them, where they stand; ``endings``: their ends without a
  decision (expiry, cancellation) and the hook every end runs;
- ``listing``: pages of requests and single requests, as their viewer may see them;
  ``records``: the records reviewers see, made of a request's rows;
- ``decisions``: who may decide a request under its rules, and recording decisions (N of M);
  ``rules``: the templates and the rules a request is stored with;
- ``sealing``: the seal at work (sealing rows as they are written, checking them as they are
  read, reporting unsealed ones at start); ``seals``: what is sealed and the checks;
  ``seal_upgrade``: the operator's one-time sealing of rows stored before a revision sealed them,
  and ``seal_manifest``: its sealed record;
- ``resolvers``: the automatic resolvers; ``resolving``: putting requests to them (and to the
  similar-call rules);
- ``similar``: similar-call rules' scopes and matching (not a template's decision rules);
  ``similar_rows``: their sealed rows; ``similar_store``: writing one while approving, revoking,
  listing, and deciding later requests by them;
- ``delegation_rows``: delegations' sealed rows; ``delegations``: writing, revoking and listing
  them, and the live ones a delegate decides under;
- ``rows``: row access (reading, the compare-and-set); ``errors``: what reviewer operations raise;
- ``schema``: the tables and their Alembic history (``schema_versions/``).
"""

__all__: list[str] = []
