"""Copies the files spotcron runs but does not import into the wheel, as package data.

vm_images/runner/ (the VM's cloud-init and runner) and functions/ (the Cloud Functions' entry
points and requirements) live beside the package in the repository; a wheel carries them under
spotcron/_bundled/, where spotcron/runtime/assets.py looks first. Everything else about the
build is in pyproject.toml.
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

# The folders spotcron/runtime/assets.py finds (its FOLDERS), each with the file that must be there.
BUNDLED = {"vm_images/runner": "runner.sh", "functions": "main.py"}
SKIPPED = {"__pycache__", ".pytest_cache", ".ruff_cache"}


class build_py_with_assets(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install runs the checkout's own folders
        here = Path(__file__).resolve().parent
        for folder, marker in BUNDLED.items():
            source = here / folder
            if not (source / marker).is_file():
                raise SystemExit(f"cannot build spotcron: {source / marker} is missing")
            for path in sorted(source.rglob("*")):
                rel = path.relative_to(source)
                if path.is_file() and not SKIPPED.intersection(rel.parts) and path.suffix not in (".pyc", ".pyo"):
                    target = Path(self.build_lib) / "spotcron" / "_bundled" / folder / rel
                    self.mkpath(str(target.parent))
                    self.copy_file(str(path), str(target))


setup(cmdclass={"build_py": build_py_with_assets})
