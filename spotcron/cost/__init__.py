"""Money: `prices` loads dated, sourced price tables; `billing` is the arithmetic of what a run
cost (it ships to the functions); `projection` is what a job will cost a month (it does not)."""
