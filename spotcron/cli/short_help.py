"""What `spotcron --help` says of each command: one line that fits an 80-column terminal.

Click cuts a docstring's first sentence to the width left beside the command's name (about 64
characters at 80 columns) and ends it with "..."; a command whose first sentence is longer gets
its line here, so the listing never cuts one. A command's own `--help` keeps its whole text.
"""

from __future__ import annotations

FITS = 64  # characters: click's 78-column text less the indent, the longest name (validate) and the gap

SHORT_HELP = {
    "build": "Build the images of the jobs that say build: (Cloud Build).",
    "delete": "Remove a job: its file and its local deployment.",
    "deploy": "Create or update the stack on Google Cloud from jobs/.",
    "destroy": "Remove the deployed stack from Google Cloud.",
    "notify": "Try the notifications of a job or of the stack.",
    "page": "Print where the results page is (a path or a URL).",
    "pause": "Stop a job's scheduled runs (paused: true in its file).",
    "report": "Compare a matrix job's configurations over their runs.",
    "resume": "Run a paused job on its schedule again.",
    "runs": "List runs, newest first: status, time, machine, cost.",
    "secrets": "Store and list the values behind the jobs' secrets:.",
    "status": "Each job's schedule health, local or deployed; runs in progress.",
    # A group's commands, by their full names.
    "notify test": "Send a test message to each destination of JOB's notify:.",
    "notify listen": "Print each notification POSTed to 127.0.0.1:PORT.",
    "secrets set": "Store a new value of secret NAME (stdin, a file or a prompt).",
}
