"""The run engine: what happens between a scheduler tick and a deleted VM.

`launch` (start_job), `finish` (job_done) and `sweep` are plain functions over `Deps`; the Cloud
Functions in functions/main.py and local mode call the same code.
"""

from spotcron.engine.deps import Deps
from spotcron.engine.finish import CallbackBody, finish
from spotcron.engine.launch import LaunchOutcome, launch
from spotcron.engine.sweep import SweepReport, sweep

__all__ = ["CallbackBody", "Deps", "LaunchOutcome", "SweepReport", "finish", "launch", "sweep"]
