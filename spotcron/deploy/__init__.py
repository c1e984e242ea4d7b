"""`spotcron deploy`, `destroy` and `pause`/`resume --cloud`: the stack on Google Cloud as data,
planned and applied.

    desired.py   what Settings and the job specs want (pure)
    actual.py    what exists, one list call per kind of resource
    planner.py   plan(desired, actual) -> [Action], and the diff printout (pure)
    executor.py  applies a plan phase by phase on a bounded thread pool (handlers.py: per type)
    apply.py     read → plan → confirm → apply → re-plan, the whole command
    destroy.py   the inverse of deploy: what exists, planned for removal
    pausing.py   one job's pause on the deployed stack, through handlers.py
    builds.py    the images deploy builds first (Cloud Build), and the specs pinned to them
    iam.py       every IAM binding, with its reason; the security rules
    source.py    the functions' reproducible source archive

Google's clients, the calls' error mapping and retries, and Google's typed messages live in
spotcron/gcp/admin/ (deployed specs are read through gcp/storage's bucket adapter, as the
dispatcher reads them); nothing here imports Google's libraries. Nothing here is imported by the
deployed functions.
"""
