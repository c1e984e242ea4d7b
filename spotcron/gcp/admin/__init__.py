"""Deploy's side of Google: the admin clients, IAM policy reads and writes, typed request
messages, the credentials check, deploy's error mapping and Cloud Build (`cloudbuild`).

Only `spotcron deploy` (and the CLI around it) imports this package; it never ships to the
functions (deploy/source.py leaves it out of the archive), and nothing the functions run may
import it.
"""
