

def test_a_machine_with_bundled_gpus_is_priced_once_as_docs_cost_md_shows(tmp_path):
    """docs/cost.md's override for an A3 (H100) machine: its GPU is in the machine's price, not added."""
    import re
    from pathlib import Path

    import pytest

    from spotcron.cost.billing import vm_items
    from spotcron.cost.prices import load_prices

    docs = (Path(__file__).resolve().parents[2] / "docs" / "cost.md").read_text()
    snippet = re.search(r"```yaml\nmachines:\n  # Placeholders.*?```", docs, re.S)[0]
    prices = tmp_path / "prices.yaml"
    prices.write_text(snippet.removeprefix("```yaml\n").removesuffix("```"))
    table = load_prices(str(prices))
    items = vm_items("a3-highgpu-1g", True, "nvidia-h100-80gb x1", 0, 3600, table, "us-central1", None)
    assert items["gpu"] == 0 and items["compute"] == pytest.approx(4.0)
