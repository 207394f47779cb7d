"""Quantizer: fixed-point parameters, calibration, the numerics contract, save/load."""

import dataclasses
import json
import math
from fractions import Fraction

import numpy as np
import pytest

from fpganet.compiler import compile_model
from fpganet.config import AcceleratorConfig, DEFAULT_CONFIG
from fpganet.datasets import LENET5_ONNX, mnist
from fpganet.errors import FpganetError
from fpganet.files import write_sums
from fpganet.golden import accumulate, run_golden, run_layer
from fpganet.model import AvgPool, Conv, Dense, Graph, MaxPool, Reshape, load_onnx, run_float
from fpganet.model.reference import _layer as float_layer
from fpganet.qnet import QAvgPool, QConv, QNetwork, load_network
from fpganet.quantize import (METHODS, activation_qparams, parse_method, quantize_linear_layer,
                              quantize_multiplier, requantize, tensor_range, weight_qparams)
from fpganet.quantize.fixed_point import (average_multiplier, exact_weight_scales, multiply_tflite,
                                          quantize_multiplier_tflite)
from fpganet.quantize.quantizer import exact_add_weights, quantize_graph

RNG = np.random.default_rng(7)


# Fixed point -------------------------------------------------------------------------------

@pytest.mark.parametrize("real", [1e-9, 3.7e-5, 0.00123, 0.25, 0.5, 0.999999, 1.0, 7.3, 16383.0])
def test_multiplier_is_15_bit_and_accurate(real):
    mult, shift = quantize_multiplier(real, "layer")
    assert 2**14 <= mult < 2**15 and 1 <= shift <= 62
    assert abs(mult * 2.0**-shift - real) <= real * 2.0**-15


@pytest.mark.parametrize("bits", [1, 2, 4, 8, 14])
@pytest.mark.parametrize("real", [3.7e-5, 0.00123, 0.25, 0.999999, 0.74, 7.3])
def test_multiplier_of_few_bits_is_the_nearest(real, bits):
    """``bits`` significant bits: a multiple of 2**(15 - bits), the nearest such value."""
    mult, shift = quantize_multiplier(real, "layer", bits)
    assert 2**14 <= mult < 2**15 and mult % 2**(15 - bits) == 0
    step = 2.0**(15 - bits - shift)
    assert abs(mult * 2.0**-shift - real) <= step / 2 * (1 + 1e-12)


@pytest.mark.parametrize("bits", [1, 3, 15])
def test_exact_weight_scales_make_the_multipliers_exact(bits):
    """Widened by less than 2**(1 - bits) each, the weight scales give multipliers that need
    no rounding in ``bits`` bits (float32 scales, as the quantizer keeps them)."""
    s_in, s_out = 0.0127282, 0.173
    s_w = np.float32(RNG.uniform(1e-4, 3e-2, 64))
    wider = exact_weight_scales(s_in, s_w, s_out, bits)
    assert wider.dtype == np.float32
    assert np.all(wider >= s_w * (1 - 1e-7)) and np.all(wider < s_w * (1 + 2.0**(1 - bits)))
    for scale in wider:
        real = float(np.float64(s_in) * np.float64(scale) / np.float64(s_out))
        mult, shift = quantize_multiplier(real, "layer", bits)
        assert abs(mult * 2.0**-shift - real) <= real * 1e-6


@pytest.mark.parametrize("bits", [1, 2, 5])
def test_exact_add_weights_keep_the_ratio_with_an_exact_multiplier(bits):
    """A residual add's common step makes its multiplier exact in ``bits``; the larger weight
    stays in the upper half of 1..127, so each input's scale is within 1/128 of its own."""
    for _ in range(200):
        s_a, s_b, s_out = RNG.uniform(0.01, 0.5, 3)
        w_a, w_b, step = exact_add_weights(s_a, s_b, s_out, bits)
        assert 1 <= min(w_a, w_b) and 64 <= max(w_a, w_b) <= 127
        for weight, scale in ((w_a, s_a), (w_b, s_b)):
            assert abs(weight * step - scale) <= step / 2 or weight == 1
        real = step / s_out
        mult, shift = quantize_multiplier(real, "add", bits)
        assert abs(mult * 2.0**-shift - real) <= real * 1e-12


@pytest.mark.parametrize("bits", [1, 3])
def test_lenet_with_few_multiplier_bits_keeps_its_accuracy(bits):
    """With the weight scales absorbing the multipliers' rounding, LeNet-5 stays as accurate
    with a shift (1 bit) or 3 bits as with 15, and every multiplier fits the bits."""
    x, y = mnist("eval", limit=1500)
    full = compile_model()
    few = compile_model(config=AcceleratorConfig(requant_mult_bits=bits))
    for layer in few.conv_layers:
        assert np.all(layer.mult % 2**(15 - bits) == 0)
        assert np.all(np.abs(layer.weight.astype(int)).reshape(len(layer.mult), -1).max(1) >= 63)
    pred_full = run_golden(full, full.quantize_input(x)).argmax(1)
    pred_few = run_golden(few, few.quantize_input(x)).argmax(1)
    assert np.mean(pred_few == pred_full) >= 0.995
    assert np.mean(pred_few == y) >= np.mean(pred_full == y) - 0.003


@pytest.mark.parametrize("real", [1e-16, 1e5, 0.0])
def test_multiplier_out_of_range_names_the_layer(real):
    with pytest.raises(FpganetError, match="layer 'fc9'"):
        quantize_multiplier(real, "fc9")


def test_requantize_rounds_half_up_exactly():
    # Reference: floor(acc * mult / 2**shift + 1/2) in exact rational arithmetic.
    acc = RNG.integers(-2**31 + 1, 2**31, 5000, dtype=np.int64)
    acc[:6] = [5, -5, 3, -3, 0, 2**31 - 1]  # with mult 2**14, shift 15: +-2.5, +-1.5 are ties
    mult = np.array([2**14, 23_457, 32_767])
    shift = np.array([15, 29, 62])
    for channel in range(3):
        out = requantize(acc.reshape(1, 1, -1), mult[channel:channel + 1], shift[channel:channel + 1],
                         zp_out=3, lo=-128, hi=127)[0, 0]
        expected = [min(127, max(-128, 3 + math.floor(Fraction(int(a) * int(mult[channel]),
                                                               2**int(shift[channel])) + Fraction(1, 2))))
                    for a in acc]
        assert out.tolist() == expected
    ties = requantize(np.array([[[5, -5, 3, -3]]]), [2**14], [15], 0, -128, 127)[0, 0]
    assert ties.tolist() == [3, -2, 2, -1]  # half toward +infinity, not to even


def _tflite_multiply(x, mult, shift):
    """TFLite's C++ MultiplyByQuantizedMultiplier (double rounding), transcribed line by line
    with C++'s truncating division (an independent scalar reading of the numpy version)."""
    left, right = max(shift, 0), max(-shift, 0)
    a, b = x * (1 << left), mult
    if a == b == -2**31:
        high = 2**31 - 1
    else:
        ab = a * b
        nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
        total = ab + nudge
        high = abs(total) // (1 << 31) * (1 if total >= 0 else -1)
    mask = (1 << right) - 1
    remainder = high & mask
    threshold = (mask >> 1) + (1 if high < 0 else 0)
    return (high >> right) + (1 if remainder > threshold else 0)


def test_tflite_multiply_is_tflites_arithmetic():
    rng = np.random.default_rng(3)
    cases = []
    for _ in range(20000):
        mult, shift = int(rng.integers(0, 2**31)), int(rng.integers(-31, 8))
        bound = 2**31 >> max(shift, 0)
        x = int(rng.integers(-bound, bound)) if rng.random() < 0.5 else int(rng.integers(-999, 999))
        cases.append((x, mult, shift))
    # Exact ties at both roundings, both signs.
    cases += [(x, 1 << 30, s) for x in (-3, -2, -1, 1, 2, 3) for s in (-1, -2, 0)]
    x, mult, shift = (np.array(column, dtype=np.int64) for column in zip(*cases))
    np.testing.assert_array_equal(multiply_tflite(x, mult, shift),
                                  [_tflite_multiply(*case) for case in cases])
    # Single rounding, TFLite's C++ (TFLITE_SINGLE_ROUNDING): one 64-bit product, one shift.
    def single(x, mult, shift):
        total = 31 - shift
        return (x * mult + (1 << (total - 1))) >> total
    np.testing.assert_array_equal(multiply_tflite(x, mult, shift, single=True),
                                  [single(*case) for case in cases])
    # Single rounding: (x * M + 2**(30 - shift)) >> (31 - shift), ties toward +inf.
    assert multiply_tflite(-3, 1 << 30, -1, single=True) == -1       # -0.75 -> -1
    assert multiply_tflite(-2, 1 << 30, -1, single=True) == 0        # -0.5 -> 0
    assert _tflite_multiply(-2, 1 << 30, -1) == -1                   # double: away from zero


def test_tflite_multiplier_is_tflites_quantize_multiplier():
    for real in (1e-9, 3.7e-5, 0.00123, 0.25, 0.5, 0.999999, 1.0, 7.3, 16383.0):
        mult, shift = quantize_multiplier_tflite(real, "layer")
        assert 2**30 <= mult < 2**31 and -31 <= shift <= 30
        assert abs(mult * 2.0**(shift - 31) - real) <= real * 2.0**-31
    # Rounded half away from zero, then renormalized at 2**31, as TFLite's std::round.
    assert quantize_multiplier_tflite(1 - 2**-33, "layer") == (2**30, 1)
    assert quantize_multiplier_tflite(2**-40, "layer") == (0, 0)
    with pytest.raises(FpganetError, match="layer 'big'"):
        quantize_multiplier_tflite(2.0**31, "big")


@pytest.mark.parametrize("count", [1, 2, 3, 4, 6, 9, 49, 64, 2895, 5000])
def test_average_multiplier_divides_as_tflite_average_pool(count):
    """TFLite's AVERAGE_POOL_2D: (sum + count/2) / count for sum > 0, (sum - count/2) / count
    otherwise, C++ division truncating; every int8 sum of ``count`` codes."""
    total = np.arange(-128 * count, 127 * count + 1, dtype=np.int64)
    half = count // 2
    expected = np.where(total > 0, (total + half) // count, -((half - total) // count))
    mult, shift = average_multiplier(count)
    assert 2**30 <= mult < 2**31
    np.testing.assert_array_equal(multiply_tflite(total, mult, shift, single=True), expected)


def _tflite_conv(mode="tflite", **changes):
    """A small QConv with TFLite multipliers (valid in the tflite mode)."""
    layer = QConv(name="c", kind="conv", in_shape=(2, 3, 3), out_shape=(3, 3, 3), kernel=(1, 1),
                  stride=(1, 1), pads=(0, 0, 0, 0), zp_in=0, zp_out=0, lo=-128, hi=127, relu=False,
                  weight=np.ones((3, 2, 1, 1), np.int8), bias=np.zeros(3, np.int32),
                  mult=np.full(3, 1 << 30, np.int32), shift=np.full(3, -3, np.int32), s_in=1.0,
                  s_out=1.0, s_w=np.ones(3, np.float32))
    return dataclasses.replace(layer, **changes)


def test_tflite_layers_are_checked_against_the_mode():
    """The tflite layer forms are refused in the fpganet mode, naming the cause first; a left
    shift that could leave int32 and a bias beyond the 28-bit entry are refused by name."""
    _tflite_conv().validate(32, "tflite")
    with pytest.raises(FpganetError, match="layer 'c': single rounding is a tflite requantization; "
                                           "this network is fpganet"):
        _tflite_conv(single_rounding=True).validate(32, "fpganet")
    with pytest.raises(FpganetError, match="layer 'c': mult must lie in"):
        _tflite_conv().validate(32, "fpganet")
    with pytest.raises(FpganetError, match="shifted left by 30 could leave int32"):
        _tflite_conv(shift=np.full(3, 30, np.int32)).validate(32, "tflite")
    with pytest.raises(FpganetError, match="bias must lie in"):
        _tflite_conv(bias=np.full(3, 1 << 27, np.int32)).validate(32, "tflite")
    pool = QAvgPool(name="p", in_shape=(2, 4, 4), out_shape=(2, 1, 1), kernel=(4, 4), stride=(4, 4),
                    pads=(0, 0, 0, 0), zp_in=0, zp_out=0, lo=-128, hi=127, relu=False,
                    mult=(1 << 30) + 1, shift=-3, s_in=1.0, s_out=1.0, sum_codes=True)
    pool.validate(32, "tflite")
    with pytest.raises(FpganetError, match="the sum of the codes is a tflite requantization"):
        pool.validate(32, "fpganet")
    # The codes' sum reaches 128 * 16: shifted left by 21 it leaves int32 (the RTL would wrap).
    with pytest.raises(FpganetError, match="could leave int32"):
        dataclasses.replace(pool, shift=21).validate(32, "tflite")


def test_tflite_network_round_trips_with_its_mode(tmp_path):
    """single_rounding and sum_codes survive save and load; an older manifest without
    requant_mode (or either field) reads as the fpganet mode."""
    config = DEFAULT_CONFIG.replace(requant_mode="tflite")
    pool = QAvgPool(name="p", in_shape=(3, 3, 3), out_shape=(3, 1, 1), kernel=(3, 3), stride=(3, 3),
                    pads=(0, 0, 0, 0), zp_in=0, zp_out=0, lo=-128, hi=127, relu=False,
                    mult=(1 << 30) + 1, shift=-3, s_in=1.0, s_out=1.0, sum_codes=True, inputs=(0,))
    net = QNetwork(layers=[_tflite_conv(single_rounding=True), pool], input_name="x",
                   input_shape=(2, 3, 3), input_scale=1.0, input_zp=0, output_name="y",
                   output_shape=(3, 1, 1), output_scale=1.0, output_zp=0, config=config)
    net.validate()
    (tmp_path / "t").mkdir()
    net.save(tmp_path / "t")
    write_sums(tmp_path / "t")
    loaded = load_network(tmp_path / "t")
    assert loaded.config.requant_mode == "tflite"
    assert loaded.layers[0].single_rounding and loaded.layers[1].sum_codes
    q = RNG.integers(-128, 128, (4, 2, 3, 3)).astype(np.int8)
    np.testing.assert_array_equal(run_golden(loaded, q), run_golden(net, q))
    old = compile_model(out_dir=tmp_path / "old")
    manifest = json.loads((tmp_path / "old" / "manifest.json").read_text())
    del manifest["config"]["requant_mode"]
    (tmp_path / "old" / "manifest.json").write_text(json.dumps(manifest))
    write_sums(tmp_path / "old")
    assert load_network(tmp_path / "old").config == old.config


def test_activation_qparams_represent_zero_exactly():
    for rmin, rmax in [(-1.3, 4.1), (0.0, 6.0), (0.5, 2.0), (-3.0, -1.0), (-0.42, 2.82)]:
        scale, zp = activation_qparams(rmin, rmax)
        assert scale == float(np.float32(scale)) and -128 <= zp <= 127
        assert min(rmin, 0) >= scale * (-128 - zp) - scale / 2
        assert max(rmax, 0) <= scale * (127 - zp) + scale / 2
    assert activation_qparams(0.0, 6.0)[1] == -128  # post-ReLU: real 0 is the lowest code


def test_weights_symmetric_per_channel():
    w = RNG.normal(0, 1, (5, 3, 2, 2)).astype(np.float32)
    w[3] = 0.0
    q, s = weight_qparams(w)
    assert q.dtype == np.int8 and s.dtype == np.float32 and q.min() >= -127
    assert np.all(np.abs(q[[0, 1, 2, 4]]).reshape(4, -1).max(1) == 127)
    assert np.all(q[3] == 0) and s[3] > 0
    np.testing.assert_allclose(q * s.reshape(-1, 1, 1, 1), w, atol=float(s.max()) / 2 + 1e-7)


# One layer: the contract -------------------------------------------------------------------

def random_conv(relu=True, m=4, c=3, size=7, pads=(1, 2, 0, 1), stride=(2, 1)):
    k = (3, 3)
    ho = (size + pads[0] + pads[2] - k[0]) // stride[0] + 1
    wo = (size + pads[1] + pads[3] - k[1]) // stride[1] + 1
    return Conv(name="cv", weight=RNG.normal(0, 0.5, (m, c, *k)).astype(np.float32),
                bias=RNG.normal(0, 0.5, m).astype(np.float32), stride=stride, pads=pads,
                in_shape=(c, size, size), out_shape=(m, ho, wo), relu=relu)


def test_accumulator_folds_the_input_zero_point_and_pads_with_it():
    layer = random_conv()
    q = quantize_linear_layer(layer, s_in=0.05, zp_in=17, s_out=0.1, zp_out=-20)
    x = RNG.integers(-128, 128, (2, *layer.in_shape)).astype(np.int8)
    acc = accumulate(q, x)
    # Direct definition: pad with zp_in, subtract zp_in, multiply, add the unfolded bias.
    top, left, bottom, right = q.pads
    xp = np.pad(x.astype(np.int64) - q.zp_in, ((0, 0), (0, 0), (top, bottom), (left, right)))
    w = q.weight.astype(np.int64)
    bias = np.rint(layer.bias.astype(np.float64) / (0.05 * q.s_w.astype(np.float64))).astype(np.int64)
    expected = np.zeros_like(acc)
    for i in range(acc.shape[2]):
        for j in range(acc.shape[3]):
            patch = xp[:, :, i * q.stride[0]:i * q.stride[0] + 3, j * q.stride[1]:j * q.stride[1] + 3]
            expected[:, :, i, j] = np.einsum("nckl,mckl->nm", patch, w) + bias
    assert np.array_equal(acc, expected)
    assert np.array_equal(q.bias_unfolded, bias)


def test_relu_is_folded_into_the_clamp():
    layer = random_conv(relu=True)
    q = quantize_linear_layer(layer, 0.05, 3, 0.02, -128)
    assert q.lo == -128 and q.relu
    q2 = quantize_linear_layer(layer, 0.05, 3, 0.02, -60)
    assert q2.lo == -60
    x = RNG.integers(-128, 128, (3, *layer.in_shape)).astype(np.int8)
    assert run_layer(q2, x).min() >= -60
    q3 = quantize_linear_layer(random_conv(relu=False), 0.05, 3, 0.02, -60)
    assert q3.lo == -128


def test_integer_layer_tracks_the_float_layer():
    layer = random_conv(relu=False, pads=(0, 0, 0, 0), stride=(1, 1))
    x = RNG.normal(0, 1, (4, *layer.in_shape)).astype(np.float32)
    y = float_layer(layer, x)
    s_in, zp_in = activation_qparams(x.min(), x.max())
    s_out, zp_out = activation_qparams(y.min(), y.max())
    q = quantize_linear_layer(layer, s_in, zp_in, s_out, zp_out)
    qx = np.clip(np.rint(x / s_in) + zp_in, -128, 127).astype(np.int8)
    got = s_out * (run_layer(q, qx).astype(np.float64) - zp_out)
    assert np.abs(got - y).max() < 4 * s_out  # a few LSB of input and weight rounding


def test_accumulator_overflow_is_refused_naming_the_layer():
    k = 140_000  # 127 * 128 * 140000 > 2**31
    dense = Dense(name="huge_fc", weight=np.ones((2, k), np.float32), bias=np.zeros(2, np.float32),
                  in_shape=(k, 1, 1), out_shape=(2, 1, 1))
    with pytest.raises(FpganetError, match="layer 'huge_fc'.*overflow"):
        quantize_linear_layer(dense, 0.01, 0, 0.1, 0)


def test_unrepresentable_multiplier_is_refused_naming_the_layer():
    with pytest.raises(FpganetError, match="layer 'cv'"):
        quantize_linear_layer(random_conv(), s_in=1.0, zp_in=0, s_out=1e-9, zp_out=0)


# Calibration -------------------------------------------------------------------------------

def test_calibration_methods_give_ranges_around_zero():
    values = np.concatenate([RNG.normal(0, 1, 100_000), [40.0, -35.0]]).astype(np.float32)
    relu = np.maximum(values, 0)
    for method in [*METHODS, "percentile:99.9"]:
        low, high = tensor_range(values, method)
        assert low <= 0 <= high
        assert tensor_range(relu, method)[0] == 0
    assert tensor_range(values, "minmax") == (-35.0, 40.0)
    for method in ("percentile", "mse", "kl"):
        assert tensor_range(relu, method)[1] < 40.0  # the outlier is clipped
    with pytest.raises(FpganetError, match="unknown calibration method"):
        parse_method("median")
    with pytest.raises(FpganetError, match="percentile"):
        parse_method("percentile:30")


def _pooled_graph(pool):
    """Conv (4 channels, 8x8, no ReLU) -> ``pool`` -> Dense to 3 classes."""
    conv = Conv(name="cv", weight=RNG.normal(0, 0.5, (4, 3, 3, 3)).astype(np.float32),
                bias=np.zeros(4, np.float32), stride=(1, 1), pads=(1, 1, 1, 1),
                in_shape=(3, 8, 8), out_shape=(4, 8, 8))
    kernel = (8, 8) if pool is AvgPool else (2, 2)
    size = 1 if pool is AvgPool else 4
    pooled = pool(name="pool", kernel=kernel, stride=kernel, pads=(0, 0, 0, 0),
                  in_shape=(4, 8, 8), out_shape=(4, size, size))
    flat = Reshape(name="flat", in_shape=(4, size, size), out_shape=(4 * size * size, 1, 1))
    dense = Dense(name="fc", weight=RNG.normal(0, 0.5, (3, 4 * size * size)).astype(np.float32),
                  bias=np.zeros(3, np.float32), in_shape=(4 * size * size, 1, 1),
                  out_shape=(3, 1, 1))
    return Graph(name="pooled", input_name="x", input_shape=(3, 8, 8), output_name="y",
                 output_shape=(3,), layers=[conv, pooled, flat, dense])


@pytest.mark.parametrize("pool", [AvgPool, MaxPool])
def test_mse_calibration_does_not_clip_what_an_average_pool_reads(pool):
    # An average pool divides the rounding errors' variance by its count, not the bias
    # that clipping adds: the conv before it is ranged by min/max, whatever mse would clip.
    graph = _pooled_graph(pool)
    x = RNG.standard_t(3, (64, 3, 8, 8)).astype(np.float32)   # heavy tails: mse clips them
    _, outputs = run_float(graph, x, layer_outputs=True)
    net = quantize_graph(graph, x, method="mse")
    minmax = activation_qparams(*tensor_range(outputs[0], "minmax"))
    mse = activation_qparams(*tensor_range(outputs[0], "mse"))
    assert mse != minmax
    expected = minmax if pool is AvgPool else mse
    assert (net.layers[0].s_out, net.layers[0].zp_out) == pytest.approx(expected)
    # The graph input and the dense layer, which no average pool reads, keep mse.
    assert net.input_scale == pytest.approx(activation_qparams(*tensor_range(x, "mse"))[0])
    dense = activation_qparams(*tensor_range(outputs[3], "mse"))
    assert (net.layers[3].s_out, net.layers[3].zp_out) == pytest.approx(dense)
    # Other methods are as asked.
    percentile = quantize_graph(graph, x, method="percentile")
    assert percentile.layers[0].s_out == pytest.approx(
        activation_qparams(*tensor_range(outputs[0], "percentile"))[0])


@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_method_keeps_lenet_close_to_float(method):
    x, y = mnist("eval", limit=1500)
    float_pred = run_float(load_onnx(LENET5_ONNX), x).argmax(1)
    net = compile_model(method=method)
    pred = run_golden(net, net.quantize_input(x)).argmax(1)
    assert np.mean(pred == float_pred) >= 0.995
    assert np.mean(pred == y) >= np.mean(float_pred == y) - 0.003


# Save and load -----------------------------------------------------------------------------

def test_compiled_directory_round_trips(tmp_path):
    net = compile_model(out_dir=tmp_path / "out")
    loaded = load_network(tmp_path / "out")
    assert len(loaded.layers) == len(net.layers)
    for a, b in zip(net.layers, loaded.layers):
        assert type(a) is type(b) and a.in_shape == b.in_shape and a.out_shape == b.out_shape
        if isinstance(a, QConv):
            for name in ("weight", "bias", "mult", "shift"):
                assert np.array_equal(getattr(a, name), getattr(b, name))
                assert getattr(a, name).dtype == getattr(b, name).dtype
            assert (a.zp_in, a.zp_out, a.lo, a.hi, a.kernel, a.stride, a.pads) == \
                (b.zp_in, b.zp_out, b.lo, b.hi, b.kernel, b.stride, b.pads)
    assert (loaded.input_scale, loaded.input_zp) == (net.input_scale, net.input_zp)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["source"]["sha256"] and manifest["config"]["rows"] == 2
    assert manifest["totals"]["macs"] == 416_520
    assert [layer["macs"] for layer in manifest["layers"] if layer["type"] == "conv"] == \
        [117_600, 240_000, 48_000, 10_080, 840]
    first = manifest["layers"][0]
    assert len(first["mult"]) == 6 and all(2**14 <= m < 2**15 for m in first["mult"])


def test_tampered_manifest_is_refused(tmp_path):
    compile_model(out_dir=tmp_path / "out")
    path = tmp_path / "out" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["layers"][2]["zp_in"] = 5  # no longer chains with the layer before
    path.write_text(json.dumps(manifest))
    with pytest.raises(FpganetError, match="manifest.json' does not match its SHA-256"):
        load_network(tmp_path / "out")
    # Even with its digests written again, the edit is caught by the network's own checks.
    write_sums(tmp_path / "out")
    with pytest.raises(FpganetError, match="zero point"):
        load_network(tmp_path / "out")
