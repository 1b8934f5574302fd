"""What the SEP server says, in two wordings: a faithful server may phrase its texts any way it likes."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Wording:
    """The texts of one wording: a pending task, a result, a denial, the degraded answer."""

    pending: str
    immediate: str
    paid: str
    failed: str
    denied: str
    expired: str
    degraded: str


WORDINGS = {
    "plain": Wording(
        pending="pay needs approval; it runs only if approved.",
        immediate="This payment is waiting for approval. It has not run.",
        paid="Paid {amount} to {to}. The call was approved and the tool ran once.",
        failed="The approved payment was attempted and failed: the bank refused it.",
        denied="The approval was denied. The tool did not run.",
        expired="The approval request expired before anyone decided. The tool did not run.",
        degraded="pay did not run: it needs approval, which needs a client that declares tasks. Ask the user.",
    ),
    "other": Wording(
        pending="Waiting on treasury sign-off.",
        immediate="Parked until someone with authority says yes.",
        paid="Done: {amount} went to {to}.",
        failed="Attempted, and the bank said no; something may have reached it.",
        denied="Declined by the reviewers: the tool was not called and no money moved.",
        expired="Nobody answered in time, so it lapsed; nothing happened.",
        degraded="Sign-off required, and this client cannot wait for one; nothing happened.",
    ),
}
