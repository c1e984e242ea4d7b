"""An example spotcron job: a small text bot, in the spirit of the bots the recipe ran.

Each run composes one short post with a word-level Markov chain over a built-in corpus (no
network, nothing to download) and writes it to the results directory:

    post.txt    the post
    post.json   the post with how it was made (seed, run id, counts, time)

The seed comes from --seed, else from the run id spotcron passes in SPOTCRON_RUN_ID, so a run
retried after a preemption writes the same post.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
from datetime import UTC, datetime
from pathlib import Path

CORPUS = """
the cheapest server is the one that is not running .
a cron job wakes up , does its work , and goes back to sleep .
spot machines are cheap because they can vanish at any moment .
a good bot writes one small thing and then gets out of the way .
the scheduler fires , the machine boots , the container runs , the machine is gone .
every run leaves its results in a bucket and its cost in a table .
billing by the second makes a two minute job cost almost nothing .
a preempted run starts again from its last checkpoint .
the disk costs money while the machine sleeps , so the machine never sleeps .
small machines , short runs , and a bill measured in cents .
the bot reads nothing from the internet and still has something to say .
a container is a promise that the code runs the same way every time .
"""

MAX_WORDS = 40


def chain(corpus: str) -> dict[str, list[str]]:
    words = corpus.split()
    table: dict[str, list[str]] = {}
    for current, following in zip(words, words[1:], strict=False):
        table.setdefault(current, []).append(following)
    return table


def compose(seed: int, max_words: int = MAX_WORDS) -> str:
    rng = random.Random(seed)
    table = chain(CORPUS)
    sentence_starts = [w for w in table if w not in {".", ","}]
    words = [rng.choice(["the", "a", "every", rng.choice(sentence_starts)])]
    while len(words) < max_words:
        options = table.get(words[-1])
        if not options:
            break
        words.append(rng.choice(options))
        if words[-1] == "." and len(words) >= 8:
            break
    text = " ".join(words).replace(" ,", ",").replace(" .", ".").rstrip(",")
    if not text.endswith("."):
        text += "."
    return ". ".join(sentence[:1].upper() + sentence[1:] for sentence in text.split(". "))


def seed_for(run_id: str) -> int:
    return int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:8], "big")


def main(argv: list[str] | None = None, environ: dict[str, str] | None = None) -> int:
    environ = dict(os.environ if environ is None else environ)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, help="fixed seed (default: from SPOTCRON_RUN_ID)")
    parser.add_argument("--results", type=Path, default=Path(environ.get("SPOTCRON_RESULTS_DIR", "/results")),
                        help="where post.txt and post.json go (default: $SPOTCRON_RESULTS_DIR or /results)")
    args = parser.parse_args(argv)

    run_id = environ.get("SPOTCRON_RUN_ID", "manual")
    seed = args.seed if args.seed is not None else seed_for(run_id)
    post = compose(seed)
    record = {
        "text": post,
        "words": len(post.split()),
        "chars": len(post),
        "seed": seed,
        "job": environ.get("SPOTCRON_JOB"),
        "run_id": run_id,
        "attempt": int(environ.get("SPOTCRON_ATTEMPT", "1")),
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
    }
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "post.txt").write_text(post + "\n", encoding="utf-8")
    (args.results / "post.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(post)
    print(f"wrote {args.results / 'post.txt'} and post.json ({record['words']} words, seed {seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
