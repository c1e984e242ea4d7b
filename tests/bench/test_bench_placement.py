"""The bench's placement section on its dated snapshot: figures at 1, 10 and 100 jobs beside classic."""

from __future__ import annotations

from bench import placement_bench


def test_the_placement_section_prices_every_size_beside_the_classic_design():
    section = placement_bench.run()
    names = [f.name for f in section.figures]
    for n in ("1 job", "10 jobs", "100 jobs"):
        assert f"{n}: fixed us-central1" in names
    by_name = {f.name: f for f in section.figures}
    fixed = by_name["10 jobs: fixed us-central1"]
    home = by_name["10 jobs: placement, image in the stack's regional repository (us-central1)"]
    moved = by_name["10 jobs: placement, image in a US multi-region repository (us-east4)"]
    # Pulling the image across regions costs more than a 2-minute job saves: it stays home.
    assert home.spotcron == fixed.spotcron
    assert moved.spotcron < fixed.spotcron and moved.baseline == fixed.baseline
    assert any("read 2026-11-25" in note for note in section.notes)
