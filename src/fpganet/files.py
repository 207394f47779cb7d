"""What fpganet writes: built aside, renamed into place, and verifiable.

The rules every command follows (docs/reference/errors.md):

- An output directory (``compile -o``, ``report -o``, ``synth -o``) is built in a
  temporary sibling and renamed into place, so a failure leaves nothing half-written.
  It ends up holding :data:`SUMS`, the SHA-256 of every other file in it, in the
  format of ``sha256sum`` (``sha256sum -c SHA256SUMS`` checks it by hand).
- An existing output directory is replaced only when it is empty or when every file
  in it is one fpganet wrote, unchanged since (listed in its :data:`SUMS`, same
  digest). Anything else, a ``NOTES.txt`` added to an earlier output or a web folder
  that happens to hold a ``manifest.json``, is refused in one line and left alone.
- An output never is, or lies inside, or contains, one of the command's inputs.
- An output file (``run --out``, ``mnist -o``) is written to a temporary file beside
  it and renamed; an existing file there is replaced only when fpganet wrote it (it
  carries the :data:`MARKER` array).
- Readers of a compiled directory call :func:`verify_directory` first, naming the files
  they read: a truncated, edited or missing file, or one the listing leaves out, is refused
  in one line that names it.
"""

import contextlib
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from .errors import FpganetError

__all__ = ["SUMS", "MARKER", "file_sha256", "directory_digests", "read_sums", "write_sums",
           "check_replaceable", "check_not_input", "check_output_directory", "check_output_file",
           "staged_directory", "atomic_file", "write_text_atomic", "existing_file",
           "verify_directory", "require_listed", "check_writable_folder", "write_npz"]

#: The file in every output directory that lists the SHA-256 of the others.
SUMS = "SHA256SUMS"
#: The array in every ``.npz`` fpganet writes that says which command wrote it.
MARKER = "fpganet_written_by"


def file_sha256(path):
    """Hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _entries(directory):
    """Every entry below ``directory`` (relative POSIX paths), folders by their files."""
    directory = Path(directory)
    found = []
    for root, folders, files in os.walk(directory, followlinks=False):
        for name in files:
            found.append((Path(root) / name).relative_to(directory).as_posix())
        for name in folders:
            path = Path(root) / name
            if path.is_symlink() or not any(path.iterdir()):
                found.append(path.relative_to(directory).as_posix() + "/")
    return sorted(found)


def directory_digests(directory):
    """``{relative path: SHA-256}`` of every file below ``directory`` except :data:`SUMS`."""
    return {name: file_sha256(Path(directory) / name)
            for name in _entries(directory) if name != SUMS and not name.endswith("/")}


def write_sums(directory):
    """Write :data:`SUMS` for everything in ``directory``; returns the digests."""
    digests = directory_digests(directory)
    text = "".join(f"{digest}  {name}\n" for name, digest in sorted(digests.items()))
    (Path(directory) / SUMS).write_text(text)
    return digests


def read_sums(directory):
    """The digests :data:`SUMS` lists, or None when it is absent or not in its format."""
    try:
        text = (Path(directory) / SUMS).read_text()
    except (OSError, UnicodeDecodeError):
        return None
    digests = {}
    for line in text.splitlines():
        digest, separator, name = line.partition("  ")
        if (not separator or len(digest) != 64 or not name or name.startswith("/")
                or ".." in Path(name).parts or any(c not in "0123456789abcdef" for c in digest)):
            return None
        digests[name] = digest
    return digests


def check_replaceable(out, what="output directory"):
    """Refuse (:class:`FpganetError`) unless ``out`` is absent, empty, or wholly fpganet's.

    Wholly fpganet's: it holds :data:`SUMS` and nothing that :data:`SUMS` does not list,
    and every listed file still has its digest.
    """
    out = Path(out)
    if not out.exists() and not out.is_symlink():
        return
    if out.is_symlink() or not out.is_dir():
        raise FpganetError(f"{what} '{out}' exists and is not a directory; refusing to replace it")
    try:
        entries = _entries(out)
    except OSError as error:
        raise FpganetError(f"cannot read the {what} '{out}': {error.strerror}") from None
    if not entries:
        return
    digests = read_sums(out)
    if digests is None:
        raise FpganetError(f"{what} '{out}' is not empty and was not written by fpganet (it has no "
                           f"{SUMS}); refusing to replace it: choose another folder or empty it")
    foreign = [name for name in entries if name != SUMS and name not in digests]
    if foreign:
        more = f" and {len(foreign) - 1} more" if len(foreign) > 1 else ""
        raise FpganetError(f"{what} '{out}' holds '{foreign[0]}'{more}, which fpganet did not "
                           f"write; refusing to replace it: move it away or choose another folder")
    for name, digest in sorted(digests.items()):
        path = out / name
        if path.is_file() and file_sha256(path) != digest:
            raise FpganetError(f"'{path}' was changed since fpganet wrote it; refusing to replace "
                               f"the {what} '{out}': move it away or choose another folder")


def check_not_input(out, inputs, what="output"):
    """Refuse when ``out`` is, lies inside, or contains, one of ``inputs`` (paths or None)."""
    target = Path(os.path.realpath(out))
    for given in inputs:
        if given is None:
            continue
        source = Path(os.path.realpath(given))
        if target == source or source.is_relative_to(target) or target.is_relative_to(source):
            raise FpganetError(f"{what} '{out}' would overwrite the input '{given}'; "
                               f"choose another {what}")


def check_output_directory(out, inputs=(), what="output directory"):
    """Refuse an output folder that is or holds one of ``inputs``, that fpganet did not write
    (:func:`check_not_input`, :func:`check_replaceable`), or that is or holds the current
    directory (``-o .`` inside an earlier output: it is replaced whole, and the shell would be
    left in a folder that no longer exists). Commands with minutes of work call it before
    starting; :func:`staged_directory` calls it again."""
    check_not_input(out, inputs, what)
    if Path(os.getcwd()).is_relative_to(os.path.realpath(out)):
        raise FpganetError(f"{what} '{out}' is, or holds, the current directory, and fpganet "
                           f"replaces an output folder whole: run it from outside that folder, "
                           f"or give another")
    check_replaceable(out, what)


@contextlib.contextmanager
def staged_directory(out, inputs=(), what="output directory"):
    """Build an output directory aside, then rename it into place.

    Yields the temporary directory (a sibling of ``out``) to write into. On normal exit
    :data:`SUMS` is written into it and it replaces ``out`` (see :func:`check_replaceable`,
    checked before and again just before the rename); on an exception it is removed and
    ``out`` is untouched.
    """
    out = Path(out)
    check_output_directory(out, inputs, what)
    parent = out.absolute().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=parent))
        os.chmod(staging, 0o755)
    except OSError as error:
        raise FpganetError(f"cannot create the {what} '{out}': {error.strerror}") from None
    try:
        yield staging
        write_sums(staging)
        check_replaceable(out, what)
        if out.exists():
            retired = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=parent))
            try:
                os.rename(out, retired / out.name)
            except OSError:
                os.rmdir(retired)               # nothing was moved: leave no empty folder
                raise
            try:
                os.rename(staging, out)
            except OSError:
                os.rename(retired / out.name, out)      # the earlier output, as it was
                os.rmdir(retired)
                raise
            shutil.rmtree(retired, ignore_errors=True)
        else:
            os.rename(staging, out)
    except OSError as error:
        shutil.rmtree(staging, ignore_errors=True)
        raise FpganetError(f"cannot write the {what} '{out}': {error.strerror or error}") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def verify_directory(directory, needed=(), what="compiled directory", again="compile it again"):
    """Refuse a directory whose files differ from what its :data:`SUMS` lists, or whose
    :data:`SUMS` leaves out one of the files ``needed`` (those the reader will open: an
    emptied or cut-down listing vouches for nothing).

    Returns the digests. A needed file not listed, a file listed but missing, one whose
    bytes changed, or a missing or malformed :data:`SUMS`, each give one line naming the file.
    """
    directory = Path(directory)
    digests = read_sums(directory)
    if digests is None:
        state = "malformed" if (directory / SUMS).exists() else "missing"
        raise FpganetError(f"{what} '{directory}' cannot be verified: its {SUMS} is {state} "
                           f"(written by another tool or an older fpganet?); {again}")
    require_listed(directory, digests, needed, what, again)
    for name, digest in sorted(digests.items()):
        path = directory / name
        if not path.is_file():
            raise FpganetError(f"{what} '{directory}' is incomplete: '{name}' is missing; {again}")
        if file_sha256(path) != digest:
            raise FpganetError(f"'{path}' does not match its SHA-256 in {SUMS}: truncated or "
                               f"changed since fpganet wrote it; {again}")
    return digests


def require_listed(directory, digests, needed, what="compiled directory", again="compile it again"):
    """Refuse when ``digests`` (:func:`verify_directory`'s) leave out one of the files ``needed``."""
    unlisted = [name for name in needed if name not in digests]
    if unlisted:
        raise FpganetError(f"{what} '{directory}' cannot be verified: its {SUMS} does not list "
                           f"'{unlisted[0]}' (cut down or edited?); {again}")


def check_writable_folder(folder, what):
    """Refuse, in one line and writing nothing, a ``folder`` that could not be created or
    written into: it, or the nearest of its parents that exists, is a file, or refuses a new
    entry (no permission, a read-only file system). Tried by making a folder and removing it."""
    folder = Path(folder).absolute()
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        under = "is" if existing == folder else f"lies under '{existing}', which is"
        raise FpganetError(f"{what} '{folder}' {under} not a directory")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".fpganet-", dir=existing))
    except OSError as error:
        raise FpganetError(f"{what} '{folder}' cannot be written: '{existing}': "
                           f"{error.strerror or error}") from None


def check_output_file(path, inputs=()):
    """Refuse an output file that is one of ``inputs`` or that fpganet did not write.

    Commands call it before their work, so that a long run does not end in a refusal.
    """
    path = Path(path)
    check_not_input(path, inputs, "output file")
    if path.is_dir():
        raise FpganetError(f"output file '{path}' is a directory")
    if (path.exists() or path.is_symlink()) and _marker(path) is None:
        raise FpganetError(f"output file '{path}' exists and was not written by fpganet; "
                           f"refusing to overwrite it: choose another name")
    if not path.absolute().parent.is_dir():
        raise FpganetError(f"cannot write '{path}': its folder does not exist")


@contextlib.contextmanager
def atomic_file(path):
    """Yield a binary stream whose bytes replace ``path`` whole on normal exit.

    The stream is a temporary file beside ``path``, renamed over it at the end (mode 0644);
    on an exception it is removed and ``path`` is untouched. An OS error becomes one line.
    """
    path = Path(path)
    try:
        handle, staging = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp",
                                           dir=path.absolute().parent)
    except OSError as error:
        raise FpganetError(f"cannot write '{path}': {error.strerror}") from None
    try:
        with os.fdopen(handle, "wb") as stream:
            yield stream
        os.chmod(staging, 0o644)
        os.replace(staging, path)
    except OSError as error:
        os.unlink(staging)
        raise FpganetError(f"cannot write '{path}': {error.strerror}") from None
    except BaseException:
        os.unlink(staging)
        raise


def existing_file(path, role):
    """``path`` as a string, or a one-line refusal naming the ``role`` ("model file") when it
    does not exist or is not a regular file."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FpganetError(f"{role} '{path}' does not exist")
    if not os.path.isfile(path):
        raise FpganetError(f"{role} '{path}' is not a regular file")
    return path


def write_text_atomic(path, text):
    """Replace ``path`` with ``text`` whole (:func:`atomic_file`): a reader, or another
    process writing the same cache entry, never sees half a file."""
    with atomic_file(path) as stream:
        stream.write(text.encode())


def write_npz(path, command, inputs=(), **arrays):
    """Write a ``.npz`` atomically, marked as written by ``command``.

    Refuses (:func:`check_output_file`) when ``path`` is one of ``inputs``, or when a
    file is there that fpganet did not write (an ``.npz`` without the :data:`MARKER` array).
    """
    check_output_file(path, inputs)
    with atomic_file(path) as stream:
        np.savez(stream, **arrays, **{MARKER: np.array(f"fpganet {command}")})


def _marker(path):
    """The :data:`MARKER` text of an ``.npz`` fpganet wrote, else None."""
    try:
        with np.load(path, allow_pickle=False) as data:
            if MARKER in data.files:
                return str(data[MARKER])
    except Exception:
        return None
    return None
