"""spotcron installed like a tool: a wheel built from this repository, installed into a fresh
virtual environment outside it, runs a new user's first session in a folder of their own:
init, validate, up --once, runs, logs, results.

Offline: the wheel is built with the setuptools this interpreter already has (no build
isolation, no index), and the fresh environment borrows this one's installed dependencies
through a .pth line, so nothing is downloaded. spotcron itself comes only from the wheel.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# What a build reads: pyproject.toml's backend, setup.py's bundling, MANIFEST.in's sdist list.
BUILD_INPUTS = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "spotcron", "functions", "vm_images/runner")
SETUPTOOLS_NEEDED = (77,)  # pyproject.toml's build-system.requires

pytestmark = pytest.mark.slow


def _why_no_offline_build() -> str | None:
    if importlib.util.find_spec("pip") is None:
        return "pip is not installed in this interpreter"
    try:  # not imported: setuptools replaces distutils process-wide when it is
        installed = importlib.metadata.version("setuptools")
    except importlib.metadata.PackageNotFoundError:
        return "setuptools is not installed here, and building its wheel offline needs it (no build isolation)"
    major = installed.split(".")[0]
    if not major.isdigit() or (int(major),) < SETUPTOOLS_NEEDED:
        return f"setuptools {installed} is older than pyproject.toml's setuptools>=77"
    return None


def _run(args: list[str], *, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300) \
        -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, f"{done.args}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin/ folder of a fresh venv holding spotcron from a wheel built from a copy of this checkout."""
    why = _why_no_offline_build()
    if why:
        pytest.skip(f"cannot build a wheel offline: {why}")
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    for rel in BUILD_INPUTS:
        if (ROOT / rel).is_dir():
            shutil.copytree(ROOT / rel, source / rel, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            (source / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, source / rel)
    wheels = work / "wheels"
    _ok(_run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "--quiet",
              "--wheel-dir", str(wheels), str(source)], cwd=work))
    [wheel] = wheels.glob("spotcron-*.whl")
    venv = work / "venv"
    _ok(_run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=work))
    python = venv / "bin" / "python"
    purelib = Path(_ok(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                            cwd=work)).strip())
    # This interpreter's dependencies, after the venv's own site-packages (so the wheel's spotcron wins);
    # a plain path line runs no .pth found there, so an editable install of the checkout stays out.
    ours = dict.fromkeys(sysconfig.get_paths()[key] for key in ("purelib", "platlib"))
    (purelib / "borrowed_dependencies.pth").write_text("".join(f"{path}\n" for path in ours))
    _ok(_run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
              "--quiet", str(wheel)], cwd=work))
    return venv / "bin"


@pytest.fixture
def user(tmp_path: Path, installed: Path):
    """Runs the installed `spotcron` in a new user's folder outside the repository."""
    home = tmp_path / "my-project"
    home.mkdir()
    assert not home.resolve().is_relative_to(ROOT)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SPOTCRON_", "PYTHON")) and k not in ("VIRTUAL_ENV", "PUBSUB_EMULATOR_HOST")}
    env["PATH"] = f"{installed}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}"
    env["COLUMNS"] = "200"

    def spotcron(*args: str, timeout: float = 120) -> str:
        return _ok(_run([str(installed / "spotcron"), *args], cwd=home, env=env, timeout=timeout))

    spotcron.home = home  # type: ignore[attr-defined]
    spotcron.python = installed / "python"  # type: ignore[attr-defined]
    spotcron.env = env  # type: ignore[attr-defined]
    return spotcron


def test_the_installed_package_is_the_wheel_with_its_runner_and_functions(user) -> None:
    script = ("import spotcron; from spotcron.runtime import assets; "
              "print(spotcron.__file__); print(assets.runner_dir()); print(assets.functions_dir())")
    where = _ok(_run([str(user.python), "-c", script], cwd=user.home, env=user.env)).split()
    venv = user.python.parent.parent
    assert [Path(p).is_relative_to(venv) for p in where] == [True, True, True], where
    assert where[1].endswith("spotcron/_bundled/vm_images/runner")
    assert where[2].endswith("spotcron/_bundled/functions")


def test_a_wheel_install_would_deploy_the_checkouts_archive(user) -> None:
    from spotcron.deploy.source import build_source

    script = "from spotcron.deploy.source import build_source; print(build_source().sha256)"
    installed = _ok(_run([str(user.python), "-c", script], cwd=user.home, env=user.env)).strip()
    assert installed == build_source(ROOT).sha256


def test_a_new_users_first_session_outside_the_repository(user) -> None:
    wrote = user("init")
    assert wrote.startswith("wrote jobs/hello.yaml, infra/stack.yaml, jobs/schema.json, .gitignore\n")
    assert "1 job valid" in user("validate")
    up = user("up", "--once", timeout=240)
    assert "1/1 runs that ran succeeded" in up
    [run] = json.loads(user("runs", "--json"))
    assert (run["job"], run["state"], run["exit_code"]) == ("hello", "succeeded", 0)
    run_id = f"hello/{run['run_id']}"
    assert "hello from spotcron" in user("logs", run_id)
    listing = user("results", run_id)
    assert "hello.txt" in listing
    assert "UTC" in user("results", run_id, "--cat", "hello.txt")  # `date -u`, written by the job
    assert (user.home / ".spotcron" / "bucket").is_dir()
