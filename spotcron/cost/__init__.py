"""Money: `prices` loads dated, sourced price tables; `billing` is the arithmetic of what a run
cost and what a job will cost a month."""
