"""What the ONNX importer's walk and its op handlers share: labels and the tensor state."""

from collections import namedtuple

__all__ = ["BATCH", "DataInput", "TensorState", "describe", "layer_name", "shape_text"]

BATCH = "N"  # the symbolic batch size inside folded shape expressions

#: The data tensor a handler reads: its ONNX name, per-sample view and orientation.
DataInput = namedtuple("DataInput", "name view orientation")


class TensorState:
    """What the importer knows about one data tensor.

    ``view``: the ONNX shape without the batch axis; ``orientation``: 0 when the batch is
    axis 0, 1 when a 2-D tensor has been transposed so that the batch is axis 1;
    ``layer``: the IR layer whose output holds its data (None: the graph input);
    ``canon``: that data's canonical shape (a Reshape still to emit when a layer wants
    another); ``exclusive``: no other node reads the data between ``layer`` and here (so a
    BatchNorm may be folded back into it); ``affine``: a per-element ``(scale, shift)`` over
    the stored data, still to fold forward, and ``affine_node`` the node that made it;
    ``order``: logical flat index -> stored flat index after a Transpose (None: NCHW), and
    ``order_node`` that Transpose.
    """

    __slots__ = ("view", "orientation", "layer", "canon", "exclusive", "affine", "affine_node",
                 "order", "order_node")

    def __init__(self, view, orientation, layer, canon, exclusive=True, affine=None,
                 affine_node=None, order=None, order_node=None):
        self.view, self.orientation, self.layer, self.canon = tuple(view), orientation, layer, canon
        self.exclusive, self.affine, self.affine_node = exclusive, affine, affine_node
        self.order, self.order_node = order, order_node


def describe(node, index):
    """``Conv node 'name'``, or ``Conv node #3 (output 'y')`` for a node without a name."""
    if node.name:
        return f"{node.op_type} node '{node.name}'"
    output = node.output[0] if node.output else "?"
    return f"{node.op_type} node #{index} (output '{output}')"


def layer_name(node, index):
    """The IR name of the layer a node makes."""
    if node.name:
        return node.name
    return f"{node.op_type.lower()}_{node.output[0] if node.output else index}"


def shape_text(shape):
    return "[" + ", ".join(str(d) for d in shape) + "]"
