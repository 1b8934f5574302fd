"""The reviewer surface's limits, in a module of their own so a command line can read them without
importing the HTTP layer."""

__all__ = ["MAX_BATCH_SIZE", "MAX_COMMENT_CHARS", "MAX_DECISION_BYTES", "MAX_PAGE_SIZE", "STORE_RETRY_AFTER_S"]

#: The longest comment a reviewer may attach to a decision.
MAX_COMMENT_CHARS = 2000
#: The longest decision body accepted (room for the longest comment in any UTF-8); longer is a 413.
MAX_DECISION_BYTES = 16 * 1024
#: The most requests one page of a listing holds (also the default page size).
MAX_PAGE_SIZE = 200
#: The ``Retry-After`` (seconds) of a 503 answered while the store cannot be reached.
STORE_RETRY_AFTER_S = 2
#: The most requests one batch decision (``POST /approvals/decide``) names.
MAX_BATCH_SIZE = 100
