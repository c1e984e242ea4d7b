"""The deployed functions' backends: Google's, configured from the function's environment.

Deploy sets SPOTCRON_* variables on each function (project, zones, bucket, service accounts,
the job_done URL); this is the one place that turns them into a `Deps`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from spotcron.core.settings import load_settings
from spotcron.engine.deps import Deps


def google_deps(environ: Mapping[str, str]) -> Deps:
    from spotcron.cost.billing import cost_function
    from spotcron.engine.clock import SystemClock
    from spotcron.gcp.advisor import GoogleAdvisor
    from spotcron.gcp.compute import GoogleCompute
    from spotcron.gcp.downscoped import DownscopedMinter
    from spotcron.gcp.id_tokens import GoogleIdentity
    from spotcron.gcp.pubsub import PubSubEvents
    from spotcron.gcp.storage import GcsBlobs
    from spotcron.runtime import webhooks
    from spotcron.runtime.cloudinit import render_user_data
    from spotcron.runtime.run_end import install
    from spotcron.runtime.secret_values import google_lookup

    settings = load_settings(None, environ, required=("project", "bucket"))
    deps = Deps(
        settings=settings,
        compute=GoogleCompute(settings.project, settings.zones),
        blobs=GcsBlobs(settings.bucket),
        events=PubSubEvents(settings.project),
        identity=GoogleIdentity(),
        clock=SystemClock(),
        user_data=functools.cache(render_user_data),
        run_cost=cost_function(environ.get("SPOTCRON_PRICES"), settings.region,
                               image_gb=settings.placement.image_gb, results_gb=settings.placement.results_gb),
        minter=DownscopedMinter(),
        # Asked by the sweep only, and only while a deployed job is placed across regions.
        advisor=GoogleAdvisor(settings.project),
    )
    return install(deps, post=webhooks.post, secrets=google_lookup(settings.project), default=settings.notify)
