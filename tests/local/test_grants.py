"""Local access grants, pure: token minting and checking, and the access-boundary rules."""

from __future__ import annotations

import pytest

from spotcron.engine.broker import boundary_rules
from spotcron.local.grants import Access, GrantError, Grants, condition_holds, prefix_rules

NOW = 1_800_000_000
BUCKET = "spotcron-local"
PREFIX = "runs/bot/20261122-1000/"


def _grant(rules, grants=None):
    grants = grants or Grants(b"k" * 32)
    return grants.check(f"Bearer {grants.mint_downscoped(rules, now=NOW)}", now=NOW + 1)


def test_a_full_token_allows_everything_until_it_expires():
    grants = Grants(b"k" * 32)
    token = grants.mint_full(now=NOW, lifetime_s=60)

    assert grants.check(f"Bearer {token}", now=NOW + 59).allows(Access("storage.objects.delete", "any", "x"))
    with pytest.raises(GrantError, match=r"expired 1 s ago; get a fresh one"):
        grants.check(f"Bearer {token}", now=NOW + 61)


@pytest.mark.parametrize("header, message", [
    (None, "no Authorization header: send `Authorization: Bearer TOKEN`"),
    ("Basic abc", "Authorization scheme 'Basic' is not accepted: use `Bearer TOKEN`"),
    ("Bearer local-access-token.vm-1", "the bearer token is not a local storage token"),
])
def test_a_missing_or_foreign_token_is_refused_with_the_reason(header, message):
    with pytest.raises(GrantError, match=message.replace("(", r"\(").replace("`", "`")):
        Grants().check(header, now=NOW)


def test_a_token_from_another_key_or_altered_is_refused():
    token = Grants(b"a" * 32).mint_full(now=NOW)
    head, payload, signature = token.split(".")

    with pytest.raises(GrantError, match="signature is not this server's"):
        Grants(b"b" * 32).check(f"Bearer {token}", now=NOW)
    forged = Grants(b"a" * 32).mint_full(now=NOW + 10**6).split(".")[1]
    with pytest.raises(GrantError, match="signature is not this server's"):
        Grants(b"a" * 32).check(f"Bearer {head}.{forged}.{signature}", now=NOW)


def test_a_vm_reaches_its_attempt_and_checkpoint_only():
    grant = _grant(boundary_rules(BUCKET, "bot", "20261122-1000", 2))

    for permission in ("storage.objects.create", "storage.objects.get", "storage.objects.delete"):
        assert grant.allows(Access(permission, BUCKET, f"{PREFIX}attempt-2/results/out.json"))
        assert grant.allows(Access(permission, BUCKET, f"{PREFIX}checkpoint/state.bin"))
    for name in (f"{PREFIX}run.json", f"{PREFIX}attempt-1/manifest.json", "runs/bot/20261122-1100/attempt-2/x",
                 "deployed/bot.json", "index.html", f"{PREFIX}attempt-22/x"):
        assert not grant.allows(Access("storage.objects.create", BUCKET, name)), name
        assert not grant.allows(Access("storage.objects.get", BUCKET, name)), name
    assert not grant.allows(Access("storage.objects.create", "other-bucket", f"{PREFIX}attempt-2/x"))


def test_a_vm_lists_under_its_own_prefixes_only():
    grant = _grant(boundary_rules(BUCKET, "bot", "20261122-1000", 2))

    assert grant.allows(Access("storage.objects.list", BUCKET, list_prefix=f"{PREFIX}checkpoint/"))
    assert grant.allows(Access("storage.objects.list", BUCKET, list_prefix=f"{PREFIX}attempt-2/results/"))
    assert not grant.allows(Access("storage.objects.list", BUCKET, list_prefix=PREFIX))
    assert not grant.allows(Access("storage.objects.list", BUCKET, list_prefix=""))


def test_object_creator_cannot_overwrite_or_read():
    grant = _grant(prefix_rules(BUCKET, [("roles/storage.objectCreator", "drop/")]))

    assert grant.allows(Access("storage.objects.create", BUCKET, "drop/a"))
    assert not grant.allows(Access("storage.objects.delete", BUCKET, "drop/a"))  # so no overwrite
    assert not grant.allows(Access("storage.objects.get", BUCKET, "drop/a"))


def test_a_rule_without_a_condition_covers_its_bucket():
    grant = _grant([{"availableResource": f"//storage.googleapis.com/projects/_/buckets/{BUCKET}",
                     "availablePermissions": ["inRole:roles/storage.objectViewer"]}])

    assert grant.allows(Access("storage.objects.get", BUCKET, "anything"))
    assert not grant.allows(Access("storage.objects.create", BUCKET, "anything"))


@pytest.mark.parametrize("expression", [
    "resource.name.startsWith('projects/_/buckets/spotcron-local/objects/runs/') && true",
    "resource.name.endsWith('.json')",
    "resource.type == 'storage.googleapis.com/Object'",
    "resource.name.startsWith(\"projects/_/buckets/spotcron-local/objects/runs/\")",
    "",
])
def test_a_condition_that_cannot_be_read_grants_nothing(expression):
    access = Access("storage.objects.get", BUCKET, "runs/bot/x")

    assert condition_holds(expression, access) is False
    grant = _grant([{"availableResource": f"//storage.googleapis.com/projects/_/buckets/{BUCKET}",
                     "availablePermissions": ["inRole:roles/storage.objectViewer"],
                     "availabilityCondition": {"expression": expression}}])
    assert not grant.allows(access)


def test_unknown_roles_grant_nothing():
    grant = _grant([{"availableResource": f"//storage.googleapis.com/projects/_/buckets/{BUCKET}",
                     "availablePermissions": ["inRole:roles/storage.admin", "storage.objects.get"]}])

    assert not grant.allows(Access("storage.objects.get", BUCKET, "x"))


def test_minting_refuses_rules_of_the_wrong_shape():
    grants = Grants()

    with pytest.raises(ValueError, match="needs at least one rule"):
        grants.mint_downscoped([], now=NOW)
    with pytest.raises(ValueError, match=r"accessBoundaryRules\[0\].availableResource = 'gs://b': write "
                                         r"'//storage.googleapis.com/projects/_/buckets/BUCKET'"):
        grants.mint_downscoped([{"availableResource": "gs://b", "availablePermissions": ["inRole:x"]}], now=NOW)
