"""The pure model: job specs and their loader, cron, runs and their states, the run descriptor,
the bucket layout, the machine catalog, settings and errors.

Nothing here imports a cloud library, reads the clock or the environment: callers pass `now`,
settings and clients in.
"""
