"""Money: `prices` loads dated, sourced price tables; `billing` is the arithmetic of what a run
cost (the engine's cost function) and `transfer` the data transfer a run pays outside the stack's
region: these ship to the functions. `projection` is what a job and the stack will cost a month,
for `spotcron cost` and the benchmarks; it does not ship."""
