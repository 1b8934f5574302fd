"""One Cedar evaluation for both questions a denial asks: is the request denied, and would an approval help.

A requestable denial needs two verdicts: the policy set's, and that of the set without its
``@requestable`` forbids (would the rest permit the request?). Evaluating both sets costs two
Cedar runs. Instead the PDP evaluates once a *probe* set: every policy of the set with its effect
turned into ``permit``, under its own id. Cedar answers a permit with every satisfied permit as
its reason, so the probe names every policy whose scope and conditions held, and every policy
whose evaluation failed; Cedar's decision rule (allow when a permit holds and no forbid does,
policies that fail are skipped) then gives both verdicts. A set with templates has no probe and
is evaluated the plain way.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

import cedarpy

from mcp_approval.policy.cedar_loading import PolicyInfo

__all__ = ["Verdict", "probe_set", "verdicts_from_probe"]


@dataclass(frozen=True)
class Verdict:
    """Cedar's answer to one request, reduced to what the decision needs."""

    allowed: bool
    fired: tuple[str, ...]
    errored: tuple[str, ...]
    failure: str | None = None


def probe_set(policy_text: str) -> cedarpy.PolicySet | None:
    """The policies of ``policy_text``, each turned into a ``permit`` (``None``: the set has templates)."""
    est = json.loads(cedarpy.policies_to_json_str(policy_text))
    if est.get("templates") or est.get("templateLinks"):
        return None
    permits = {pid: {**body, "effect": "permit"} for pid, body in est.get("staticPolicies", {}).items()}
    return cedarpy.PolicySet.from_json_str(json.dumps({**est, "staticPolicies": permits}))


def verdicts_from_probe(probe: Verdict, info: Mapping[str, PolicyInfo]) -> tuple[Verdict, Verdict] | None:
    """The verdicts of the whole set and of the set without its ``@requestable`` forbids, from the
    probe's (``None`` when it names a policy ``info`` does not know: evaluate the sets themselves)."""
    if probe.failure is not None:
        return probe, probe
    if any(pid not in info for pid in probe.fired):
        return None
    lifted = {pid for pid, policy in info.items() if policy.is_forbid and policy.requestable}
    whole = _verdict(probe.fired, probe.errored, info)
    reduced = _verdict(
        tuple(pid for pid in probe.fired if pid not in lifted),
        tuple(pid for pid in probe.errored if pid not in lifted),
        info,
    )
    return whole, reduced


def _verdict(satisfied: tuple[str, ...], errored: tuple[str, ...], info: Mapping[str, PolicyInfo]) -> Verdict:
    """Cedar's verdict for a set whose satisfied policies are ``satisfied``: a forbid wins, then a permit."""
    forbids = tuple(pid for pid in satisfied if info[pid].is_forbid)
    if forbids:
        return Verdict(False, forbids, errored)
    permits = tuple(pid for pid in satisfied if not info[pid].is_forbid)
    return Verdict(bool(permits), permits, errored)
