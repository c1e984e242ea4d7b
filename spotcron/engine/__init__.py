"""The run engine: what happens between a scheduler tick and a deleted VM.

`start_job.launch`, `job_done.handle_callback` and `sweep.sweep` are plain functions
over `deps.Deps`; the Cloud Functions in functions/main.py and local mode call the same code.
Nothing is re-exported here, so importing one module (the ports, say) loads only what it needs.
"""
