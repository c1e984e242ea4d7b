"""The live log parts' names are inside what the broker's token reaches (the runner's own test,
test_uploads.py, shows that `spotcron logs --follow` finds the parts where the runner puts them)."""

from __future__ import annotations

from spotcron.core import layout
from spotcron.engine.broker import boundary_rules
from spotcron.local.grants import Access, Grant


def test_the_brokers_token_lets_the_runner_write_and_rewrite_its_live_log_parts_only():
    grant = Grant(expires_at=0, rules=tuple(boundary_rules("b", "bot", "20261020-0000", 1)))
    own = layout.log_part("bot", "20261020-0000", 1, 123456)
    assert own == "runs/bot/20261020-0000/attempt-1/logs/000000000123456.txt"
    # create, and delete: a part sent again after an unanswered try replaces itself.
    for permission in ("storage.objects.create", "storage.objects.delete", "storage.objects.get"):
        assert grant.allows(Access(permission, "b", own)), permission
    for foreign in (layout.log_part("bot", "20261020-0000", 2, 0), layout.log_part("bot", "20261020-0001", 1, 0)):
        assert not grant.allows(Access("storage.objects.create", "b", foreign)), foreign

