"""deploy's Google clients; never shipped to the functions."""
