"""Secret Manager's versions and accesses, and egress, in `spotcron cost`."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from spotcron.cli import cli
from spotcron.core.spec import JobSpec
from spotcron.cost.network_secrets import egress_months, secrets_month


def _job(name: str, **fields) -> JobSpec:
    return JobSpec(name=name, schedule="*/15 * * * *", image="mirror.gcr.io/library/busybox:1", **fields)


def test_twenty_jobs_every_quarter_hour_with_two_secrets_each():
    # 40 versions and 20 x 2,880 x 2 = 115,200 accesses: (40-6) x $0.06 + (115,200-10,000)/10,000 x $0.03.
    specs = [_job(f"j{i}", secrets={"A": f"a{i}", "B": f"b{i}"}) for i in range(20)]
    month = secrets_month(specs, {s.name: 2880.0 for s in specs}, "proj-one")
    assert month.versions == 40 and month.accesses == pytest.approx(115_200)
    assert month.usd_after_free == pytest.approx(34 * 0.06 + 105_200 / 10_000 * 0.03)
    assert month.usd_after_free == pytest.approx(2.3556)


def test_a_secret_shared_by_two_jobs_is_one_version_and_matrix_entries_each_read():
    specs = [_job("a", secrets={"T": "shared"}), _job("b", secrets={"T": "shared"},
                                                      matrix=[{"name": "x"}, {"name": "y"}])]
    month = secrets_month(specs, {"a": 100.0, "b": 100.0}, "p-123456")
    assert month.versions == 1 and month.accesses == 300
    assert month.usd_after_free == 0.0


def test_egress_is_priced_for_internet_jobs_only():
    specs = [_job("bot", internet=True), _job("quiet")]
    [egress] = egress_months(specs, {"bot": 100.0, "quiet": 50.0}, {"bot": 0.25})
    assert egress.job == "bot" and egress.external_ip_usd == 0.25
    assert egress.nat_usd == pytest.approx(100 * 0.0014)


def test_spotcron_cost_prints_both_with_their_sources(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "bot.yaml").write_text('schedule: "0 * * * *"\nimage: busybox\ninternet: true\n'
                                                 'secrets:\n  TOKEN: bot-token\n')
    done = CliRunner().invoke(cli, ["cost"], env={"COLUMNS": "300"}, catch_exceptions=False)
    assert done.exit_code == 0, done.output
    text = " ".join(done.output.split())
    assert "Secret Manager: 1 active version" in text and "https://cloud.google.com/secret-manager/pricing" in text
    assert "Egress of bot (internet: true)" in text and "https://cloud.google.com/nat/pricing" in text
