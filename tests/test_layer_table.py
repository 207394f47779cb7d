"""The per-layer table of `fpganet estimate` and `fpganet report`: a row per layer, cycles from
the cycle model adding up to its total per image, MACs to the network's, weight bytes to the
weight memory image's."""

import json

import numpy as np
import pytest
from test_graph_networks import inputs, mobilenet_block, residual_model

from fpganet.codegen import build_images
from fpganet.compiler import compile_model
from fpganet.estimate import estimate, estimate_main, report
from fpganet.estimate.layer_table import OUTSIDE_ENGINE
from fpganet.estimate.workload import simulated_cycles
from fpganet.golden import layer_macs
from fpganet.model import import_model
from fpganet.qnet import short_name
from fpganet.quantize import quantize_graph


def _residual():
    return quantize_graph(import_model(residual_model()), inputs((3, 8, 8), 64))


def _mobilenet():
    return quantize_graph(import_model(mobilenet_block()), inputs((3, 9, 7), 64, -3.0, 3.0))


@pytest.fixture(scope="module")
def lenet(tmp_path_factory):
    out = tmp_path_factory.mktemp("lenet")
    return compile_model(out_dir=out), out


@pytest.fixture(scope="module", params=["lenet", "lenet batch 2", "residual", "mobilenet"])
def network(request, lenet):
    """``(net, program batch)``."""
    if request.param == "lenet":
        return lenet[0], 1
    if request.param == "lenet batch 2":
        return compile_model(batch=2), 2
    return {"residual": _residual, "mobilenet": _mobilenet}[request.param](), 1


def test_rows_add_up_to_the_cycle_model_and_the_network(network):
    net, batch = network
    result = estimate(net, measure=False, synth=False, program_batch=batch)
    table = result.layer_table
    layers = [row for row in table.rows if row["index"] is not None]
    assert [row["index"] for row in layers] == list(range(len(net.layers)))
    assert [row["layer"] for row in layers] == [layer.name for layer in net.layers]
    assert [row["macs"] for row in layers] == layer_macs(net)
    total = simulated_cycles(net, net.config, batch)["total"]
    assert table.total["cycles"] == result.cycles.value == total
    assert sum(row["cycles"] for row in table.rows) == pytest.approx(total, abs=1e-9)
    assert [row["layer"] for row in table.rows[len(layers):]] == [OUTSIDE_ENGINE]
    assert table.total["macs"] == net.macs == sum(row["macs"] for row in table.rows)
    rows, cols = net.config.rows, net.config.cols
    for row in layers:
        if row["cycles"]:
            assert row["utilization"] == row["macs"] / (row["cycles"] * rows * cols)
            assert 0 <= row["utilization"] <= 1
    stored = build_images(net, n_images=batch, batch=batch).layout["weights"]["bytes"]
    assert table.total["weight_bytes"] == sum(row["weight_bytes"] for row in table.rows) == stored
    for row, layer in zip(layers, net.layers):
        if layer.type != "reshape":
            assert row["act_in_bytes"] == int(np.prod(layer.in_shape))
            assert row["act_out_bytes"] == int(np.prod(layer.out_shape))
        if layer.type == "conv":    # at least the int8 weights, padded to whole words
            assert row["weight_bytes"] >= layer.weight.size


def test_the_terminal_shows_a_line_per_layer(lenet, capsys):
    net, out = lenet
    assert estimate_main([str(out), "--no-measure"]) == 0
    printed = capsys.readouterr().out.splitlines()
    start = next(i for i, line in enumerate(printed) if line.startswith("per layer"))
    heading = next(i for i in range(start, len(printed)) if printed[i].startswith("layer "))
    assert printed[heading].split() == ["layer", "op", "MACs", "cycles", "util", "weight", "B",
                                        "in", "B", "out", "B"]
    body = printed[heading + 2:heading + 2 + len(net.layers)]
    for index, (line, layer) in enumerate(zip(body, net.layers)):
        assert line.startswith(short_name(index, layer.name, 28)), line
    total = printed[heading + 2 + len(net.layers) + 2]
    cycles = simulated_cycles(net)["total"]
    assert total.split()[:3] == ["total", f"{net.macs:,}", f"{cycles:,}"]


def test_json_and_markdown_carry_the_rows(lenet, tmp_path):
    net, _ = lenet
    result = estimate(net, measure=False, synth=False)
    data = json.loads(result.to_json())["fpga"]["layer_table"]
    assert data["columns"][:6] == ["index", "layer", "op", "macs", "cycles", "utilization"]
    assert len(data["rows"]) == len(net.layers) + 1
    assert data["total"]["cycles"] == simulated_cycles(net)["total"]
    report(result, tmp_path / "rep")
    text = (tmp_path / "rep" / "report.md").read_text()
    assert "## FPGA: per layer" in text
    body = text.split("## FPGA: per layer")[1].split("\n## ")[0]
    assert sum(line.startswith("| ") for line in body.splitlines()) == len(net.layers) + 3


def test_without_the_cycle_model_the_rows_are_the_tiled_estimate(lenet):
    net, _ = lenet
    result = estimate(net, measure=False, synth=False, simulate=False)
    table = result.layer_table
    assert table.cycles_source.startswith("estimated")
    assert len(table.rows) == len(net.layers)
    assert table.total["cycles"] == sum(layer.tiled_cycles for layer in result.workload.layers)


def test_the_table_takes_its_weight_bytes_from_the_plan_the_cycles_were_timed_on(lenet,
                                                                                 monkeypatch):
    """The back end plans the network once per estimate: the table's weight bytes come with
    the simulated cycles; only an estimate whose cycles were given plans again for them."""
    from fpganet.estimate import layer_table

    planned = []
    original = layer_table.plan_network
    monkeypatch.setattr(layer_table, "plan_network",
                        lambda *args, **kwargs: planned.append(1) or original(*args, **kwargs))
    net = lenet[0]
    table = estimate(net, measure=False, synth=False).layer_table
    assert planned == []
    given = estimate(net, measure=False, synth=False, cycles=12345).layer_table
    assert planned == [1]
    layers = [row["weight_bytes"] for row in table.rows if row["layer"] != OUTSIDE_ENGINE]
    assert layers == [row["weight_bytes"] for row in given.rows]
    assert sum(row["weight_bytes"] for row in table.rows) == len(
        build_images(net, 1, net.config).weights) * net.config.weight_word_bytes
