"""The package list in pyproject.toml names every Python package of the source tree."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_is_installed():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(project["packages"])
    on_disk = set()
    for name, folder in project["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder).parts
            if "__pycache__" not in relative:
                on_disk.add(".".join((name, *relative)))
    assert on_disk <= listed, f"packages missing from pyproject.toml: {sorted(on_disk - listed)}"
