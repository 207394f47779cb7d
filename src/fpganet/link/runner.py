"""Running a compiled network over the host link: load once, then one image after another,
each image's input sent (and, where the board takes it, its START queued) while the
previous one computes."""

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
        Each image's cycle stamp (the accelerator's counter at its STAMP; with several images
        a START, the counter since that START).
    image_seconds : list of float
        Wall time per image: from the previous START's outputs (the first: from sending
        its input) to this START's, shared by its images. The next START's input (and START)
        are sent while one computes, so this is the time per image of a long run.
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
               timeout=10.0, progress=None, images_per_start=1, design=0):
    """Load a compiled network once, then run it on each image, sending each image's input
    while the previous one computes (the host link's input FIFO holds it).

    Parameters
    ----------
    link : BoardLink
    memories : dict
        ``{HostSpace: words}``: the words (integers) of each memory from address 0, as the
        host write port takes them (program words, weight words with byte ``i`` = array row
        ``i``, parameter entries, activation bytes). The program must process
        ``images_per_start`` images per START, each ending with its outputs and a STAMP.
    inputs : iterable of bytes
        Each image's input-stream bytes (all of one length when ``images_per_start`` > 1: the
        last START's missing images are sent as zeros, and their outputs dropped).
    output_bytes : int
        Output bytes per image, before the ``stamp_bytes`` of the cycle stamp.
    config : AcceleratorConfig, optional
        Refuse a board whose accelerator differs from it, or that holds another design than
        ``design`` (PING's; 0, the int8 accelerator, by default).
    timeout : float
        Seconds one image may take.
    progress : callable, optional
        ``progress(index, output, cycles)`` after each image.
    images_per_start : int
        Images one START runs (a program compiled with ``--batch B``: B).

    Returns
    -------
    BoardRun
    """
    info = link.ping()
    if config is not None:
        link.check_config(config, design)
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

    images = _starts(inputs, images_per_start)
    current = next(images, None)
    if current is None:
        return result
    began = time.monotonic()
    launch(current[0])
    index = 0
    while current is not None:
        sent, count = current
        following = next(images, None)
        # The next START's images go into the input FIFO while this one computes (their bytes
        # wait there until the program's INPUTs of the next run): the link works while the
        # accelerator does, the double buffering of the whole system. Where the board takes
        # START's wait byte (the SPI link), the next START is queued on the board too, and the
        # accelerator goes from one run to the next with no round trip between: then the next
        # input need only fit the FIFO by itself, and the output FIFO should hold both runs'
        # outputs (this one's are read after the next has begun: with less room the next run
        # would wait for it, and its cycle stamps would exceed the model's); the part of its
        # input the FIFO cannot take yet follows the START. Else both inputs must fit
        # the FIFO together: a SEND_INPUT that finds the FIFO still holding this image's bytes
        # would be refused (NO_SPACE) and cost a STATUS round trip.
        queued = ahead = False
        if following is not None:
            queued = (info.queued_start and len(following[0]) <= info.input_depth
                      and 2 * record * images_per_start <= info.output_depth)
            ahead = queued or len(sent) + len(following[0]) <= info.input_depth
        if queued:
            # The next run's first image (what of it the FIFO takes now) goes before the queued
            # START, the rest after it: the run reads its input as a stream, its first image's
            # bytes are there when it starts, and the START is queued soon after this run began.
            first_image = following[0][:len(following[0]) // images_per_start]
            early = link.send_input_now(first_image)
            link.start(wait=timeout, queued=True)
            if early < len(following[0]):
                link.send_input(following[0][early:], timeout=timeout)
        elif ahead:
            link.send_input(following[0], timeout=timeout)
        data = link.read_output(record * images_per_start, timeout=timeout)
        now = time.monotonic()
        for out in (data[i * record:(i + 1) * record] for i in range(count)):
            cycles = int.from_bytes(out[output_bytes:], "little")
            result.outputs.append(out[:output_bytes])
            result.cycles.append(cycles)
            result.image_seconds.append((now - began) / count)
            if progress is not None:
                progress(index, out[:output_bytes], cycles)
            index += 1
        began = now
        if following is not None and not queued:
            if ahead:
                link.start(wait=timeout)
            else:
                launch(following[0])
        current = following
    return result


def _starts(inputs, images_per_start):
    """``(bytes, images)`` of each START: ``images_per_start`` inputs side by side, the last
    START's missing ones zeros."""
    group = []
    for data in inputs:
        group.append(bytes(data))
        if len(group) == images_per_start:
            yield b"".join(group), len(group)
            group = []
    if group:
        yield b"".join(group) + bytes(len(group[0]) * (images_per_start - len(group))), len(group)
