"""`make test` keeps passing when a user adds, breaks or removes a job in jobs/.

jobs/ is the user's folder: tests use copies of the example jobs (`tests.examples`) or their
own fixtures, never the folder itself.
"""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
# The one module allowed to name the folder: it hands the tests their copies.
EXAMPLES = TESTS / "examples" / "__init__.py"
# The repository's jobs folder reached through a root path, or as a path relative to the cwd.
READS_JOBS = re.compile(r"""(ROOT|REPO)\s*/\s*["']jobs["']|load_jobs\(\[\s*["']jobs["']""")


def test_no_test_reads_the_users_jobs_folder():
    offenders = [f"{path.relative_to(TESTS.parent)}:{number}"
                 for path in sorted(TESTS.rglob("*.py")) if path != EXAMPLES
                 for number, line in enumerate(path.read_text().splitlines(), 1) if READS_JOBS.search(line)]
    assert offenders == [], "use tests.examples (a copy of the example jobs) instead"
