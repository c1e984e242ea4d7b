"""Names Google Cloud and spotcron agree on, spelled once: zone and region shapes, our label."""

from __future__ import annotations

import re

# Every resource spotcron creates carries MANAGED_LABEL=1; nothing without it is ever touched.
MANAGED_LABEL = "spotcron"

ZONE = re.compile(r"^[a-z]+-[a-z]+[0-9]+-[a-z]$")  # us-central1-a
REGION = re.compile(r"^[a-z]+-[a-z]+[0-9]+$")  # us-central1
