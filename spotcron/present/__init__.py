"""Read-only views of runs for people: CLI tables and JSON, the benchmark report, charts and the
results page. Nothing here changes a run."""
