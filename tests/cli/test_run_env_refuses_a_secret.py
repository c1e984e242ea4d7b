"""`spotcron run JOB --env NAME=VALUE` for a NAME the job declares in `secrets:` is refused before
anything is written, built or published: the value would be a secret kept as plain text in the
bucket (overrides/DIGEST.json), the run record and the VM's metadata."""

from __future__ import annotations

import pytest

from tests.cli.test_handoff import FakePublisher

JOB_FILE = ('schedule: "0 * * * *"\nimage: spotcron/bot:latest\nmachine:\n  type: e2-small\ntimeout: 5m\n'
            'secrets:\n  TOKEN: bot-token\n')
VALUE = "Tr0ub4dor-and-3-more"


class NoStack:
    def __enter__(self):
        raise AssertionError("a local stack was started for a refused run")

    def __exit__(self, *exc):
        return None


@pytest.mark.parametrize("where", [(), ("--cloud", "--project", "acme-prod", "--bucket", "gs://my-bucket")],
                         ids=["local", "cloud"])
def test_run_env_for_a_declared_secret_is_refused_before_anything_is_written(invoke, bucket, context, tmp_path,
                                                                            where):
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "bot.yaml").write_text(JOB_FILE)
    publisher = FakePublisher()
    context.publisher = lambda host: publisher
    context.local_stack = lambda state_dir, limits=None: NoStack()
    result = invoke("run", "bot", *where, "--env", f"TOKEN={VALUE}", "--env", "LEVEL=debug")
    assert result.exit_code == 2, result.output
    assert "jobs/bot.yaml: --env TOKEN: job bot declares TOKEN (secret bot-token) in `secrets:`" in result.stderr
    assert "spotcron secrets set bot-token --cloud" in result.stderr
    assert "nothing was written or started" in result.stderr
    assert VALUE not in result.output
    assert publisher.published == [] and bucket.blobs.list_quietly("") == []


def test_run_env_for_a_plain_variable_still_publishes(invoke, bucket, context, tmp_path):
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "bot.yaml").write_text(JOB_FILE)
    publisher = FakePublisher()
    context.publisher = lambda host: publisher
    result = invoke("run", "bot", "--cloud", "--project", "acme-prod", "--bucket", "gs://my-bucket",
                    "--env", "LEVEL=debug")
    assert result.exit_code == 0, result.output
    assert len(publisher.published) == 1
    assert [name for name in bucket.blobs.list_quietly("") if name.startswith("overrides/")]
