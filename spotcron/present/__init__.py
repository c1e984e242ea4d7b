"""Read-only views of runs for people: rows, JSON and the one dollar formatter (`views`), tables
that never cut a value (`tables`), a run's output as it reaches the bucket (`logs`) and the loops
that follow runs to their end (`follow`), what `up` draws while it runs (`live`), `next`'s fire
times (`schedule`), `cost`'s month (`projection`), run records read from a folder (`records`), the
benchmark report with its statistics, history, exports and output formats, charts, and the results
page. Nothing here changes a run."""
