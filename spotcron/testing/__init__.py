"""Test support, never shipped to the functions: in-memory ports with fault injection (`memory`),
the one front door to the three functions on them (`harness`), a test identity issuer on a fake
clock (`identity`), waiting on other threads and processes (`waiting`), and the seeded fault
simulation (`simulation`)."""
