"""What a board run needs from a compiled directory: the one place that reads the compiler's
output for the board."""

from dataclasses import dataclass

import numpy as np

from ..codegen.binary_images import is_binary_compiled, read_binary_images
from ..codegen.images import read_images
from ..compiler import load_compiled

__all__ = ["CompiledJob", "load_compiled_job"]


@dataclass
class CompiledJob:
    """What the board run needs from a compiled directory."""
    config: object                 # AcceleratorConfig
    memories: dict                 # {HostSpace: [int]}
    input_bytes: int               # per image
    output_bytes: int              # per image, without the stamp
    batch: int                     # images one START runs (--batch)
    quantize: object               # float x [N, *input_shape] -> int8 [N, C, H, W]
    dequantize: object             # int8 [N, ...] -> float32 logits
    input_shape: tuple             # float input shape of one sample, the model's own layout
    output_shape: tuple            # int8 output shape of one sample
    input_name: str = "input"
    embedded: bool = False
    input_layout: str = "nchw"     # of input_shape; quantize converts it to CHW
    design: int = 0                # PING's design the board must hold (0: the int8 accelerator)
    encode: object = None          # int8 [N, ...] -> each image's input-stream bytes
    decode: object = None          # [bytes] per image -> int8 [N, *output_shape]

    def __post_init__(self):
        if self.encode is None:
            self.encode = lambda q: [np.ascontiguousarray(image).tobytes() for image in q]
        if self.decode is None:
            self.decode = lambda outputs: np.frombuffer(b"".join(outputs), np.int8).reshape(
                len(outputs), *self.output_shape)


def load_compiled_job(out_dir):
    """COMPILER API: the one function that reads the compiler's output.

    Reads ``out_dir`` (written by ``fpganet compile``) through
    :func:`fpganet.compiler.load_compiled` and
    :func:`fpganet.codegen.images.read_images`, and returns a :class:`CompiledJob` of
    simple types. The program is the one-pass variant (``for_images(batch)``): one START per
    image, or per group of B images when compiled with ``--batch B``. If the compiled-images
    API changes, only this function changes.
    """
    net = load_compiled(out_dir)
    common = dict(config=net.config, quantize=net.quantize_input,
                  dequantize=net.dequantize_output, input_shape=tuple(net.input_shape),
                  input_name=net.input_name, embedded=bool(net.source.get("embedded")),
                  input_layout=net.input_layout)
    if is_binary_compiled(out_dir):
        return _binary_job(read_binary_images(out_dir, net), common)
    images = read_images(out_dir)
    batch = images.batch
    images = images.for_images(batch)        # one pass of the program's loop
    memories = {space: images.words(space) for space in images.memories}
    return CompiledJob(**{**common, "config": images.config}, memories=memories,
                       input_bytes=images.streams.input_bytes,
                       output_bytes=images.streams.output_bytes, batch=batch,
                       output_shape=tuple(images.streams.output_shape))


def _binary_job(images, common):
    """The job of a directory compiled for the binary or low-bit engine: the weights to load
    where the host loads them, else nothing (they are in the bitstream, whose PING names
    them), one image a START, the input packed at its width and the last layer's totals
    out."""
    return CompiledJob(**common, memories=images.memories, input_bytes=images.input_bytes,
                       output_bytes=images.output_bytes, batch=1,
                       output_shape=images.output_shape, design=images.folded.design_id,
                       encode=lambda q: [images.pack_inputs(image[None]) for image in q],
                       decode=images.decode)
