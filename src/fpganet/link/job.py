"""What a board run needs from a compiled directory: the one place that reads the compiler's
output for the board."""

from dataclasses import dataclass

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
    quantize: object               # float x [N, ...] -> int8 [N, C, H, W]
    dequantize: object             # int8 [N, ...] -> float32 logits
    input_shape: tuple             # float input shape of one sample
    output_shape: tuple            # int8 output shape of one sample
    input_name: str = "input"
    embedded: bool = False


def load_compiled_job(out_dir):
    """COMPILER API: the one function that reads the compiler's output.

    Reads ``out_dir`` (written by ``fpganet compile``) through
    :func:`fpganet.compiler.load_compiled` and
    :func:`fpganet.codegen.images.read_images`, and returns a :class:`CompiledJob` of
    simple types. The program is the one-image variant (``for_images(1)``): one START per
    image. If the compiled-images API changes, only this function changes.
    """
    from ..codegen.images import read_images
    from ..compiler import load_compiled

    net = load_compiled(out_dir)
    images = read_images(out_dir)
    if images.batch > 1:
        # One START runs one pass of the program's loop: B images at --batch B, which the
        # per-image protocol of run_images does not send.
        raise FpganetError(f"'{out_dir}' was compiled with --batch {images.batch}; the board "
                           f"driver runs one image per START: compile it with --batch 1")
    images = images.for_images(1)
    memories = {space: images.words(space) for space in images.memories}
    return CompiledJob(config=images.config, memories=memories,
                       input_bytes=images.streams.input_bytes,
                       output_bytes=images.streams.output_bytes,
                       quantize=net.quantize_input, dequantize=net.dequantize_output,
                       input_shape=tuple(net.input_shape),
                       output_shape=tuple(images.streams.output_shape),
                       input_name=net.input_name, embedded=bool(net.source.get("embedded")))
