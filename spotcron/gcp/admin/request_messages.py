"""The typed parts of deploy's handlers: Google's request messages built from desired fields,
and the wait on a long-running operation of a generated client.

Each takes plain values (paths, the fields desired.py computes) so that deploy decides what to
build and this module only knows how Google spells it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from spotcron.gcp.admin.calls import Caller


def wait_operation(call: Caller, what: str, operation: Any, *, initial: float, maximum: float,
                   timeout: float, poll_timeout: float) -> None:
    """Poll a generated client's long-running `operation` until done, for at most `timeout` seconds."""
    from google.api_core.future.polling import DEFAULT_POLLING
    from google.api_core.retry import Retry

    polling = DEFAULT_POLLING.with_delay(initial=initial, maximum=maximum).with_timeout(timeout)
    # A failed poll must surface (call retries it with our policy); the operations client's
    # own default would retry it for many minutes.
    no_retry = Retry(predicate=lambda exc: False, timeout=poll_timeout)
    call(what, operation.result, timeout=timeout, polling=polling, retry=no_retry)


def lifecycle_delete(age: int, prefixes: Iterable[str]) -> Any:
    """A bucket lifecycle rule: delete objects under `prefixes` (no prefixes: every object) once `age` days old."""
    from google.cloud.storage.bucket import LifecycleRuleDelete

    return LifecycleRuleDelete(age=age, matches_prefix=list(prefixes) or None)


def function_message(path: str, fields: Mapping[str, Any], *, project: str, region: str) -> Any:
    """The functions_v2.Function named `path` for desired `fields` (see desired._function)."""
    from google.cloud import functions_v2 as f

    bucket_name, _, object_name = fields["source"].removeprefix("gs://").partition("/")
    trigger = fields["trigger"]
    return f.Function(
        name=path,
        labels=dict(fields["labels"]),
        build_config=f.BuildConfig(
            runtime=fields["runtime"],
            entry_point=fields["entry_point"],
            source=f.Source(storage_source=f.StorageSource(bucket=bucket_name, object_=object_name)),
            service_account=f"projects/{project}/serviceAccounts/{fields['build_account']}",
            docker_repository=fields["docker_repository"],
        ),
        service_config=f.ServiceConfig(
            service_account_email=fields["service_account"],
            environment_variables=dict(fields["environment"]),
            ingress_settings=f.ServiceConfig.IngressSettings[fields["ingress"]],
            available_memory=fields["memory"],
            timeout_seconds=fields["timeout"],
            max_instance_count=fields["max_instances"],
            all_traffic_on_latest_revision=True,
        ),
        event_trigger=f.EventTrigger(
            event_type=trigger["event_type"],
            pubsub_topic=trigger["pubsub_topic"],
            service_account_email=trigger["service_account"],
            retry_policy=f.EventTrigger.RetryPolicy[trigger["retry_policy"]],
            trigger_region=region,
        ) if trigger else None,
    )


def scheduler_message(path: str, fields: Mapping[str, Any]) -> Any:
    """The scheduler_v1.Job named `path` for desired `fields` (see desired._scheduler)."""
    from datetime import timedelta

    from google.cloud import scheduler_v1

    retry = fields["retry"]
    return scheduler_v1.Job(
        name=path,
        description=fields["description"],
        schedule=fields["schedule"],
        time_zone=fields["time_zone"],
        pubsub_target=scheduler_v1.PubsubTarget(topic_name=fields["topic"], data=fields["data"].encode()),
        retry_config=scheduler_v1.RetryConfig(
            retry_count=retry["retry_count"],
            min_backoff_duration=timedelta(seconds=retry["min_backoff_s"]),
            max_backoff_duration=timedelta(seconds=retry["max_backoff_s"]),
            max_doublings=retry["max_doublings"],
        ),
    )
