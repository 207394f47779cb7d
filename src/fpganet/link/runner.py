"""Running a compiled network over the host link: load once, then one image after another,
each image's input sent while the previous one computes."""

import time
from dataclasses import dataclass, field

from ..codegen.images import LOAD_ORDER, STAMP_BYTES
from ..isa import HostSpace
from .client import BoardLink, LinkStats
from .protocol import DeviceInfo

__all__ = ["BoardRun", "run_images"]


@dataclass
class BoardRun:
    """What :func:`run_images` measured.

    Attributes
    ----------
    outputs : list of bytes
        Each image's output bytes (without the stamp).
    cycles : list of int
        Each image's cycle stamp (the accelerator's counter at its STAMP).
    image_seconds : list of float
        Wall time per image: from the previous image's output (the first: from sending
        its input) to this image's output. The next image's input is sent while an
        image computes, so this is the time per image of a long run.
    load_seconds : float
        Wall time of the memory load.
    stats : LinkStats
    info : DeviceInfo
    """
    outputs: list = field(default_factory=list)
    cycles: list = field(default_factory=list)
    image_seconds: list = field(default_factory=list)
    load_seconds: float = 0.0
    stats: LinkStats = None
    info: DeviceInfo = None


def run_images(link, memories, inputs, *, output_bytes, stamp_bytes=STAMP_BYTES, config=None,
               timeout=10.0, progress=None):
    """Load a compiled network once, then run it on each image, sending each image's input
    while the previous one computes (the host link's input FIFO holds it).

    Parameters
    ----------
    link : BoardLink
    memories : dict
        ``{HostSpace: words}``: the words (integers) of each memory from address 0, as the
        host write port takes them (program words, weight words with byte ``i`` = array row
        ``i``, parameter entries, activation bytes). The program must process one image per
        START and end with the image's outputs and a STAMP.
    inputs : iterable of bytes
        Each image's input-stream bytes.
    output_bytes : int
        Output bytes per image, before the ``stamp_bytes`` of the cycle stamp.
    config : AcceleratorConfig, optional
        Refuse a board whose accelerator differs from it.
    timeout : float
        Seconds one image may take.
    progress : callable, optional
        ``progress(index, output, cycles)`` after each image.

    Returns
    -------
    BoardRun
    """
    info = link.ping()
    if config is not None:
        link.check_config(config)
    link.wait_idle(timeout)
    link.flush()
    began = time.monotonic()
    for space in LOAD_ORDER:
        if memories.get(space) is not None and len(memories[space]):
            link.write_memory(space, 0, memories[space])
    result = BoardRun(load_seconds=time.monotonic() - began, stats=link.stats, info=info)
    record = output_bytes + stamp_bytes

    def fits(data):
        return len(data) <= info.input_depth

    def launch(data):
        # An image that fits the input FIFO is queued before START; a larger one is streamed
        # while the accelerator consumes it.
        if fits(data):
            link.send_input(data, timeout=timeout)
            link.start(wait=timeout)
        else:
            link.start(wait=timeout)
            link.send_input(data, timeout=timeout)

    images = iter(inputs)
    current = next(images, None)
    if current is None:
        return result
    current = bytes(current)
    began = time.monotonic()
    launch(current)
    index = 0
    while current is not None:
        following = next(images, None)
        following = None if following is None else bytes(following)
        # The next image goes into the input FIFO while this one computes (its bytes wait
        # there until the program's INPUT of the next run): the link works while the
        # accelerator does, the double buffering of the whole system.
        # Only when both images fit the FIFO together: a SEND_INPUT that finds the FIFO still
        # holding this image's bytes would be refused (NO_SPACE) and cost a STATUS round trip.
        queued = following is not None and len(current) + len(following) <= info.input_depth
        if queued:
            link.send_input(following, timeout=timeout)
        out = link.read_output(record, timeout=timeout)
        cycles = int.from_bytes(out[output_bytes:], "little")
        result.outputs.append(out[:output_bytes])
        result.cycles.append(cycles)
        now = time.monotonic()
        result.image_seconds.append(now - began)
        began = now
        if progress is not None:
            progress(index, out[:output_bytes], cycles)
        if following is not None:
            if queued:
                link.start(wait=timeout)
            else:
                launch(following)
        current = following
        index += 1
    return result
