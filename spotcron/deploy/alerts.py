"""`alerts: {failed_runs: true}`: one Cloud Monitoring alert policy on the failed runs' log entries.

The functions write one structured entry per run end (engine/run_log.py, docs/results.md); the
policy `spotcron-failed-runs` has one log-match condition on those of failed, timed-out, lost,
preempted and missed runs, and notifies the stack file's notification channels. Cloud Monitoring's
REST shape (https://cloud.google.com/monitoring/api/ref_v3/rest/v3/projects.alertPolicies): a
policy is created without a `name` (Monitoring assigns projects/P/alertPolicies/ID), holds one to
six `conditions` combined by `combiner`, a log-match condition is `conditionMatchedLog {filter,
labelExtractors}`, and a policy with one needs `alertStrategy.notificationRateLimit.period`.
The policy carries the label spotcron=1, by which deploy knows it as its own (and destroy deletes it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spotcron.core.names import MANAGED_LABEL
from spotcron.core.settings import Settings
from spotcron.deploy.resources import ALERT_POLICY, MANAGED_LABELS, NAME_PREFIX, Resource

FAILED_RUNS_POLICY = "spotcron-failed-runs"
FAILED_STATES = ("failed", "timed_out", "lost", "preempted", "missed")
FAILED_RUNS_FILTER = ('jsonPayload.event="run.ended" AND jsonPayload.state=('
                      + " OR ".join(f'"{state}"' for state in FAILED_STATES) + ")")
LABEL_EXTRACTORS = {"job": "EXTRACT(jsonPayload.job)", "run": "EXTRACT(jsonPayload.run_id)",
                    "state": "EXTRACT(jsonPayload.state)"}
DOCUMENTATION = ("A spotcron run of job ${log.extracted_label.job} ended ${log.extracted_label.state} (run "
                 "${log.extracted_label.run}). See it with `spotcron logs ${log.extracted_label.job}/"
                 "${log.extracted_label.run} --bucket gs://BUCKET` or `spotcron status`.")


def alert_policies(settings: Settings) -> list[Resource]:
    if not settings.alerts.failed_runs:
        return []
    return [Resource(ALERT_POLICY, FAILED_RUNS_POLICY, {
        "filter": FAILED_RUNS_FILTER,
        "channels": tuple(sorted(settings.alerts.notification_channels)),
        "rate_limit_s": settings.alerts.rate_limit,
        "enabled": True,
        "labels": dict(MANAGED_LABELS),
    })]


def policy_body(name: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    """The AlertPolicy JSON for a desired resource (no `name`: Monitoring assigns it)."""
    return {
        "displayName": name,
        "userLabels": dict(fields["labels"]),
        "combiner": "OR",
        "enabled": bool(fields["enabled"]),
        "conditions": [{"displayName": "a spotcron run failed",
                        "conditionMatchedLog": {"filter": fields["filter"], "labelExtractors": LABEL_EXTRACTORS}}],
        "notificationChannels": list(fields["channels"]),
        "alertStrategy": {"notificationRateLimit": {"period": f"{int(fields['rate_limit_s'])}s"}},
        "documentation": {"content": DOCUMENTATION, "mimeType": "text/markdown"},
    }


def policy_fields(policy: Mapping[str, Any]) -> dict[str, Any]:
    """The comparable fields of a policy as Monitoring returns it."""
    conditions = policy.get("conditions") or [{}]
    matched = conditions[0].get("conditionMatchedLog") or {}
    period = ((policy.get("alertStrategy") or {}).get("notificationRateLimit") or {}).get("period") or "0s"
    try:
        rate = int(float(str(period).rstrip("s")))
    except ValueError:
        rate = 0
    return {"filter": matched.get("filter", "") if len(conditions) == 1 else None,
            "channels": tuple(sorted(policy.get("notificationChannels") or ())),
            "rate_limit_s": rate, "enabled": policy.get("enabled", True) is not False,
            "labels": dict(policy.get("userLabels") or {})}


def actual_policies(policies: list[Mapping[str, Any]]) -> list[Resource]:
    """spotcron's policies among a project's: named spotcron-*, labelled spotcron=1."""
    found = []
    for policy in policies:
        name = str(policy.get("displayName") or "")
        labels = policy.get("userLabels") or {}
        if name.startswith(NAME_PREFIX) and labels.get(MANAGED_LABEL) == "1":
            found.append(Resource(ALERT_POLICY, name, policy_fields(policy), owned=True,
                                  meta={"name": policy.get("name")}))
    return found
