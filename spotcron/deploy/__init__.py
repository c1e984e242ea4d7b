"""`spotcron deploy`: the stack on Google Cloud as data, planned and applied.

    desired.py   what Settings and the job specs want (pure)
    actual.py    what exists, one list call per kind of resource
    planner.py   plan(desired, actual) -> [Action], and the diff printout (pure)
    executor.py  applies a plan phase by phase on a bounded thread pool (handlers.py: per type)
    apply.py     read → plan → confirm → apply → re-plan, the whole command
    iam.py       every IAM binding, with its reason; the security rules
    source.py    the functions' reproducible source archive

Google's clients, the calls' error mapping and retries, and Google's typed messages live in
spotcron/gcp/admin/; nothing here imports Google's libraries. Nothing here is imported by the
deployed functions.
"""
