"""Which field a person meant by an unknown one: a typo, or a word from another tool.

difflib alone both misleads and misses: `bogus_field` comes out as `build` (a ratio of 0.62 from
shared letters), and `enviroment` finds nothing (`env` is short). A suggestion needs a close match
(ratio 0.7 and up), a known field the name starts with (`enviroment` → `env`, `schedules` →
`schedule`), or a synonym people bring from Kubernetes, Docker Compose and cron tools.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

# Fields the model carries for spotcron's own use, never written in a job file (loader refuses them).
INTERNAL_FIELDS = frozenset({"variant", "repeat_index", "deploy_account"})

CUTOFF = 0.7

SYNONYMS = {  # a word from another tool -> the field here that means it
    "environment": "env", "environ": "env", "environment_variables": "env", "variables": "env", "vars": "env",
    "cmd": "command", "entrypoint": "command", "entry_point": "command",
    "arguments": "args", "argv": "args",
    "cron": "schedule", "crontab": "schedule", "when": "schedule",
    "timezone": "time_zone", "tz": "time_zone",
    "docker_image": "image", "container": "image",
    "dockerfile": "build", "context": "build",
    "machine_type": "machine", "instance_type": "machine", "vm": "machine",
    "retry": "retries", "max_retries": "retries", "backoff_limit": "retries",
    "concurrency_policy": "concurrency", "suspend": "paused", "disabled": "paused",
    "service-account": "service_account", "serviceaccount": "service_account",
    "accelerator": "gpu", "accelerators": "gpu",
}
MIN_PREFIX = 3


def suggest_field(name: str, allowed: Iterable[str]) -> str | None:
    """The field of `allowed` a person most likely meant by `name`, or None when none is likely."""
    choices = [field for field in allowed if field not in INTERNAL_FIELDS]
    typed = str(name)
    key = typed.lower().replace("-", "_")
    meant = SYNONYMS.get(key) or SYNONYMS.get(typed.lower())
    if meant in choices:
        return meant
    close = difflib.get_close_matches(key, choices, n=1, cutoff=CUTOFF)
    if close:
        return close[0]
    prefixed = [field for field in choices if len(field) >= MIN_PREFIX and key.startswith(field)]
    return max(prefixed, key=len) if prefixed else None
