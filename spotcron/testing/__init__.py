"""Test support, never shipped to the functions: in-memory ports with fault injection, a test
identity issuer on a fake clock, and the seeded fault simulation."""
