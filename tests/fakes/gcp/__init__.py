"""Recording fakes of the Google REST APIs that spotcron/gcp's adapters call (see rest.FakeRestServer)."""
