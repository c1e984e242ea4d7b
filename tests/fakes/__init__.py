"""Stand-ins for the outside world that only the tests (and the bench) use.

- `tests.fakes.gcp`: recording servers for the Google REST APIs the adapters in spotcron/gcp
  call (Compute Engine, Cloud Storage, the advice API), to pin what the real client libraries send.
- `tests.fakes.deploy`: `FakeCloud`, every API `spotcron deploy` / `destroy` calls, served locally
  behind Google's real client libraries, with faults and a call log.
- `tests/fakes/cloudbuild.py`: Cloud Build's REST API, checking each request against the
  published schema (`cloudbuild_schema.py`).
- `tests/fakes/docker.py`: a docker CLI stand-in for vm_images/runner/runner.sh, run as a script.

The in-memory ports, the test identity and the seeded simulation live in `spotcron.testing`
(the reliability run and the bench use them too); local mode (`spotcron.local`) is a product
feature, not a fake.
"""
