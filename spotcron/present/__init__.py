"""Read-only views of runs for people: CLI tables and JSON, a run's output as it reaches the bucket
(logs), the benchmark report, charts and the results page. Nothing here changes a run."""
