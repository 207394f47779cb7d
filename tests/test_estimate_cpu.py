"""Measuring the network with onnxruntime on this machine (tiny runs; nothing is asserted on time)."""

import dataclasses

import pytest

from fpganet.compiler import compile_model
from fpganet.estimate.measure import free_batch_dimension, measure_network


@pytest.fixture(scope="module")
def lenet():
    return compile_model()


@pytest.fixture(scope="module")
def measured(lenet):
    return measure_network(lenet, batches=(1, 4), min_time_s=0.01)


def test_cpu_rows_for_the_float_and_int8_models(measured):
    rows = measured["rows"]
    cpu = [row for row in rows if row["name"].startswith("CPU")]
    assert {(row["name"].split(", ", 1)[1].split()[0], row["batch"]) for row in cpu} == {
        ("float32", 1), ("float32", 4), ("int8", 1), ("int8", 4)}
    for row in cpu:
        for key in ("images_per_s", "latency_s"):
            figure = row[key]
            assert figure.source == "measured" and figure.value > 0
            assert "measured on this machine" in figure.basis
            assert "onnxruntime" in figure.basis
        assert row["watts"].value is None and row["watts"].source == "not available"
        assert row["images_per_s"].value == pytest.approx(row["batch"] / row["latency_s"].value)


def test_cuda_is_measured_or_skipped_with_a_reason(measured):
    # Imported here, not at the top: onnxruntime is slow to import.
    import onnxruntime

    if "CUDAExecutionProvider" in onnxruntime.get_available_providers():
        assert any(row["name"].startswith("CUDA") for row in measured["rows"])
    else:
        assert any(reason.startswith("CUDA:") for reason in measured["skipped"])
        assert not any(row["name"].startswith("CUDA") for row in measured["rows"])


def test_fixed_batch_model_is_freed(lenet):
    import onnx

    model = onnx.load(lenet.source["path"])
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_value == 10
    freed = free_batch_dimension(model)
    assert freed.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "N"
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_value == 10  # unchanged


def test_missing_float_model_is_skipped(lenet):
    moved = dataclasses.replace(lenet, source=dict(lenet.source, path="/nonexistent/lenet.onnx"))
    result = measure_network(moved, batches=(1,), min_time_s=0.0, providers=["CPUExecutionProvider"])
    assert [row["name"].split(", ", 1)[1].split()[0] for row in result["rows"]] == ["int8"]
    assert any("float model" in reason for reason in result["skipped"])
