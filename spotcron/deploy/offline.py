"""What a first deploy creates, without credentials: the plan against an empty project.

A newcomer can read it before logging in (`spotcron deploy --dry-run --offline`). "Empty" means
what a new project has: nothing of spotcron's, and the VMs' network with its subnet in each
region, Private Google Access off, as Google creates an auto-mode `default` network. Whether the
real project looks like that is what `spotcron doctor` checks, with credentials.
"""

from __future__ import annotations

from collections.abc import Sequence

from spotcron.core.settings import Settings
from spotcron.core.spec import JobSpec
from spotcron.deploy.desired import desired_state
from spotcron.deploy.planner import Action, plan
from spotcron.deploy.resources import SUBNETWORK, Resource, index


def first_deploy_plan(settings: Settings, jobs: Sequence[JobSpec], source_object: str) -> list[Action]:
    """The plan a first deploy shows on an empty project (before the functions' URLs exist)."""
    from spotcron.deploy.secret_grants import with_secret_accounts

    # As deploy plans them: a job with secrets runs as the account deploy makes for it, with its repository.
    desired = desired_state(settings, with_secret_accounts(settings, jobs), source_object, settings.job_done_url,
                            settings.credentials_url)
    empty = index(Resource(SUBNETWORK, r.name, {"private_ip_google_access": False})
                  for r in desired.values() if r.type == SUBNETWORK)
    return plan(desired, empty)
