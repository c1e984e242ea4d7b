"""Fake Google services for tests: local servers that Google's real clients talk to."""
