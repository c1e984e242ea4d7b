"""The layer map of docs/architecture.md as data: each package's floor, lowest first.

A module may import its own package and packages on lower floors, never a higher floor and never
a peer on its own floor. `spotcron/gcp/admin/` (deploy's Google clients) sits above gcp, whose
error mapping and retry loop it shares; it is not shipped to the functions, so only the deployer, the CLI and test support may import it.
"""

from __future__ import annotations

FLOORS: dict[str, int] = {
    "spotcron": 0,          # the package root: its version, nothing else
    "spotcron.core": 1,     # the pure model
    "spotcron.cost": 2,     # prices, and what a run cost
    "spotcron.engine": 3,   # the run lifecycle over ports
    "spotcron.gcp": 4,      # adapters on Google's clients: the ports, for the functions
    "spotcron.gcp.admin": 5,  # adapters on Google's clients: what deploy changes (uses gcp's errors, retry)
    "spotcron.runtime": 5,  # what runs inside the functions
    "functions": 6,         # the functions' entry points
    "spotcron.local": 6,    # local mode
    "spotcron.present": 6,  # views for people
    "spotcron.deploy": 6,   # deploy and destroy
    "spotcron.cli": 7,      # click wiring
    "spotcron.testing": 8,  # test support: simulation, in-memory ports; imported by no one above
}

ADMIN_IMPORTERS = frozenset({"spotcron.deploy", "spotcron.cli", "spotcron.testing"})


def package_of(module: str) -> str:
    """The entry of FLOORS a module belongs to: its longest matching prefix."""
    best = None
    for package in FLOORS:
        inside = module == package or (package != "spotcron" and module.startswith(package + "."))
        if inside and (best is None or len(package) > len(best)):
            best = package
    if best is None:
        raise KeyError(module)
    return best
