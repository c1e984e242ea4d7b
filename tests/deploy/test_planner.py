"""plan(desired, actual) is pure: these tests build states by hand and call no API."""

from __future__ import annotations

from spotcron.core.spec import JobSpec
from spotcron.deploy.desired import desired_state
from spotcron.deploy.planner import CREATE, DELETE, UPDATE, Action, format_plan, plan, summary
from spotcron.deploy.resources import (
    BUCKET,
    FUNCTION,
    IAM_POLICY,
    SCHEDULER_JOB,
    SERVICE_ACCOUNT,
    SOURCE,
    TOPIC,
    Resource,
    index,
)
from tests.deploy.conftest import make_settings

SA = "serviceAccount:spotcron-vm@demo-proj.iam.gserviceaccount.com"
FN = "serviceAccount:spotcron-functions@demo-proj.iam.gserviceaccount.com"


def job(name: str, schedule: str = "0 * * * *") -> Resource:
    return Resource(SCHEDULER_JOB, f"spotcron-{name}", {"schedule": schedule, "time_zone": "Etc/UTC", "paused": False})


def deployed(resource: Resource, owned: bool = True) -> Resource:
    return Resource(resource.type, resource.name, dict(resource.fields), owned=owned)


def test_everything_missing_is_created_in_dependency_order() -> None:
    desired = desired_state(make_settings(), [JobSpec(name="bot", schedule="0 * * * *", image="busybox")],
                            "deploy/source-abc.zip", "")
    actions = plan(desired, {})
    assert {a.kind for a in actions} == {CREATE, UPDATE}  # IAM policies are "updates" of existing policies
    order = [a.resource_type for a in actions]
    # bucket/topics/accounts, then IAM + source, then functions, then invokers + scheduler entries
    assert order.index(BUCKET) < order.index(IAM_POLICY) < order.index(FUNCTION) < order.index(SCHEDULER_JOB)
    assert max(i for i, t in enumerate(order) if t in (BUCKET, TOPIC, SERVICE_ACCOUNT)) < order.index(SOURCE)
    invoker = next(a for a in actions if a.name == "function:spotcron-job-done")
    assert all(order[i] != FUNCTION for i in range(actions.index(invoker) + 1, len(actions)))
    assert [a.name for a in actions if a.resource_type == SCHEDULER_JOB] == ["spotcron-bot", "spotcron-sweep"]


def test_matching_state_plans_nothing() -> None:
    desired = index([job("a"), job("b")])
    actual = index([deployed(job("a")), deployed(job("b"))])
    assert plan(desired, actual) == []
    assert summary([]) == "No changes: the deployed stack matches the job specs and settings."


def test_changed_field_is_one_update_with_old_and_new() -> None:
    actions = plan(index([job("a", "5 * * * *")]), index([deployed(job("a"))]))
    assert actions == [Action(UPDATE, SCHEDULER_JOB, "spotcron-a", {"schedule": ("0 * * * *", "5 * * * *")})]
    assert format_plan(actions) == [
        "~ update scheduler_job spotcron-a",
        '    schedule: "0 * * * *" → "5 * * * *"',
        "Plan: 0 to create, 1 to update, 0 to delete.",
    ]


def test_only_owned_resources_are_deleted() -> None:
    actual = index([
        deployed(job("gone")),
        Resource(TOPIC, "someone-elses-topic", {"labels": {}}, owned=False),
        Resource(TOPIC, "old-spotcron-topic", {"labels": {"spotcron": "1"}}, owned=True),
        Resource(FUNCTION, "their-function", {}, owned=False),
        Resource(SOURCE, "deploy/source-old.zip", {}, owned=True),
    ])
    actions = plan({}, actual)
    assert [(a.kind, a.resource_type, a.name) for a in actions] == [
        (DELETE, SCHEDULER_JOB, "spotcron-gone"),
        (DELETE, SOURCE, "deploy/source-old.zip"),
        (DELETE, TOPIC, "old-spotcron-topic"),
    ]
    assert actions[0].changes == {"schedule": ("0 * * * *", None), "time_zone": ("Etc/UTC", None),
                                  "paused": (False, None)}


def test_buckets_accounts_and_policies_are_never_deleted() -> None:
    actual = index([
        Resource(BUCKET, "old-bucket", {"labels": {"spotcron": "1"}}, owned=True),
        Resource(SERVICE_ACCOUNT, "x@demo-proj.iam.gserviceaccount.com", {}, owned=True),
        Resource(IAM_POLICY, "topic:old", {"roles/pubsub.publisher": (FN,)}, owned=True),
    ])
    assert plan({}, actual) == []


def test_create_only_fields_are_not_compared() -> None:
    want = Resource(BUCKET, "b", {"location": "us-central1", "labels": {"spotcron": "1"}})
    have = Resource(BUCKET, "b", {"location": "europe-west1", "labels": {"spotcron": "1"}}, owned=True)
    assert plan(index([want]), index([have])) == []


def test_iam_changes_are_per_member_and_ignore_order() -> None:
    want = Resource(IAM_POLICY, "bucket:b", {"roles/storage.objectCreator": (SA,), "roles/storage.objectAdmin": (FN,)})
    same = Resource(IAM_POLICY, "bucket:b", {"roles/storage.objectAdmin": (FN,), "roles/storage.objectCreator": (SA,)})
    assert plan(index([want]), index([same])) == []
    drifted = Resource(IAM_POLICY, "bucket:b", {"roles/storage.objectCreator": (SA,),
                                                 "roles/storage.objectViewer": ("allUsers", SA)})
    [action] = plan(index([want]), index([drifted]))
    assert action.kind == UPDATE
    assert action.changes == {"roles/storage.objectAdmin": ((), (FN,)),
                              "roles/storage.objectViewer": (("allUsers", SA), ())}
    assert format_plan([action])[:4] == [
        "~ update iam_policy bucket:b",
        f"    + roles/storage.objectAdmin {FN}",
        "    - roles/storage.objectViewer allUsers",
        f"    - roles/storage.objectViewer {SA}",
    ]


def test_missing_policy_is_planned_as_grants() -> None:
    want = Resource(IAM_POLICY, "topic:t", {"roles/pubsub.publisher": (FN,)})
    assert plan(index([want]), {}) == [Action(UPDATE, IAM_POLICY, "topic:t", {"roles/pubsub.publisher": ((), (FN,))})]


def test_dict_fields_print_only_the_changed_keys() -> None:
    want = Resource(FUNCTION, "f", {"environment": {"A": "1", "B": "2"}})
    have = Resource(FUNCTION, "f", {"environment": {"A": "1", "B": "old"}}, owned=True)
    assert format_plan(plan(index([want]), index([have])))[:2] == [
        "~ update function f", '    environment.B: "old" → "2"']


def test_long_values_are_shortened_in_the_printout() -> None:
    want = Resource(SCHEDULER_JOB, "spotcron-a", {"data": "x" * 500})
    have = Resource(SCHEDULER_JOB, "spotcron-a", {"data": "y"}, owned=True)
    line = format_plan(plan(index([want]), index([have])))[1]
    assert line.startswith('    data: "y" → "xxx') and line.endswith("…") and len(line) < 100


def test_summary_counts_each_kind() -> None:
    actions = plan(index([job("new"), job("changed", "1 * * * *")]),
                   index([deployed(job("changed")), deployed(job("gone"))]))
    assert summary(actions) == "Plan: 1 to create, 1 to update, 1 to delete."
