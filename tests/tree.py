"""A folder's contents as data, to assert that a command changed nothing (for the tests)."""

import os


def snapshot(root):
    """``{relative path: bytes}`` of every file below ``root``, and ``{folder/: None}``."""
    found = {}
    for folder, dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            with open(path, "rb") as handle:
                found[os.path.relpath(path, root)] = handle.read()
        for name in dirs:
            found[os.path.relpath(os.path.join(folder, name), root) + "/"] = None
    return found
