"""What a board run needs from a compiled directory: the one place that reads the compiler's
output for the board."""

from dataclasses import dataclass

from ..codegen.binary_images import is_binary_compiled
from ..codegen.images import read_images
from ..compiler import load_compiled
from ..errors import FpganetError
from ..isa import HostSpace

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
    if is_binary_compiled(out_dir):
        # Its bitstream answers PING as an int8 accelerator of the same configuration would:
        # nothing would tell a board that holds the wrong one.
        raise FpganetError(f"'{out_dir}' was compiled for the binary engine (--engine binary): "
                           f"fpganet board run drives the int8 accelerator only; run it with "
                           f"fpganet run --backend rtl")
    images = read_images(out_dir)
    batch = images.batch
    images = images.for_images(batch)        # one pass of the program's loop
    memories = {space: images.words(space) for space in images.memories}
    return CompiledJob(config=images.config, memories=memories,
                       input_bytes=images.streams.input_bytes,
                       output_bytes=images.streams.output_bytes, batch=batch,
                       quantize=net.quantize_input, dequantize=net.dequantize_output,
                       input_shape=tuple(net.input_shape),
                       output_shape=tuple(images.streams.output_shape),
                       input_name=net.input_name, embedded=bool(net.source.get("embedded")),
                       input_layout=net.input_layout)
