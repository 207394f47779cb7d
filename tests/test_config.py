"""The configuration object: defaults, derived values, checks with clear errors, JSON."""

import json

import pytest

from fpganet.config import DEFAULT_CONFIG, TIMING_SETS, AcceleratorConfig, ConfigError, REQUANT_LATENCIES
from fpganet.hdl.postproc import VARIANTS


def test_derived_values():
    config = AcceleratorConfig(rows=4, cols=8)
    assert config.macs_per_cycle == 32
    assert config.peak_macs_per_s == 32 * config.clock_hz
    assert config.weight_word_bytes == 4 and config.act_word_bytes == 8
    assert config.weight_buffer_words == config.weight_buffer_bytes // 4
    assert config.operand_min == -128 and config.operand_max == 127
    # The longest dot product of worst-case int8 products that int32 holds exactly.
    assert config.max_exact_k * 128 * 128 <= 2**31 - 1 < (config.max_exact_k + 1) * 128 * 128
    assert config.name == "4x8"


def test_hardware_widths():
    config = AcceleratorConfig(rows=4, cols=6, act_buffer_bytes=6000, weight_buffer_bytes=4096,
                               bias_buffer_words=300, program_words=1024)
    assert config.act_addr_width == 13          # 6,000 bytes: addresses up to 8 KiB
    assert config.weight_addr_width == 10       # 1,024 words of 4 bytes
    assert config.param_addr_width == 9
    assert config.program_addr_width == 10
    assert config.act_banks == 8 and config.bank_bits == 3 and config.bank_word_width == 10
    assert config.lanes_width == 3              # LANES up to 6
    assert config.count_width == 14
    assert AcceleratorConfig(act_buffer_bytes=1 << 17).count_width == 16    # COUNT_WIDTH at most
    assert AcceleratorConfig(cols=1, act_buffer_bytes=1, program_words=1).bank_word_width == 1


def test_json_round_trip():
    config = AcceleratorConfig(rows=3, cols=5, acc_width=24, clock_hz=48e6)
    text = config.to_json()
    assert json.loads(text)["derived"]["macs_per_cycle"] == 15
    assert AcceleratorConfig.from_json(text) == config
    assert AcceleratorConfig.from_dict(DEFAULT_CONFIG.to_dict()) == DEFAULT_CONFIG


@pytest.mark.parametrize("changes,message", [
    ({"rows": 0}, "rows must be at least 1"),
    ({"cols": 2.5}, "cols must be an integer"),
    ({"rows": True}, "rows must be an integer"),
    ({"rows": 65}, "larger than the 64x64"),
    ({"operand_width": 1}, "operand_width must be 2..16"),
    ({"acc_width": 12}, "acc_width 12 cannot hold one 8x8-bit product"),
    ({"acc_width": 65}, "acc_width must be at most 64"),
    ({"act_buffer_bytes": 4}, "act_buffer_bytes 4 is smaller than one 8-byte word"),
    ({"clock_hz": 0}, "clock_hz must be a positive number"),
    ({"pipeline_registers": 1}, "pipeline_registers must be true or false, not 1"),
    ({"diagonal_weights": "yes"}, "diagonal_weights must be true or false, not 'yes'"),
    ({"result_queue_rows": 1}, r"^result_queue_rows must be 0 \(no queue\) or 2..64, not 1$"),
    ({"result_queue_rows": 65}, r"^result_queue_rows must be 0 \(no queue\) or 2..64, not 65$"),
    ({"result_queue_rows": True}, r"^result_queue_rows must be 0 \(no queue\) or 2..64, not True$"),
    ({"requant_mult_bits": 0}, "^requant_mult_bits must be 1..15, not 0$"),
    ({"requant_mult_bits": 16}, "^requant_mult_bits must be 1..15, not 16$"),
    ({"requant_mult_bits": True}, "^requant_mult_bits must be 1..15, not True$"),
    ({"pair_products": 1}, "pair_products must be true or false, not 1"),
    ({"fused_max_pool": 1}, "fused_max_pool must be true or false, not 1"),
    ({"packed_weights": "no"}, "^packed_weights must be true or false, not 'no'$"),
    ({"packed_weights": True, "operand_width": 12},
     "^packed_weights puts two 4-bit weights in a byte: operand_width must be 8, not 12$"),
    ({"binary_weights": 1}, "^binary_weights must be true or false, not 1$"),
    ({"binary_weights": True, "operand_width": 12},
     "^binary_weights puts 8 one-bit weights in a byte: operand_width must be 8, not 12$"),
    ({"fused_max_pool": True, "requant_lanes": 2},
     "^fused_max_pool needs requant_lanes 1, bank_access 'arbitrated' and at least 2 columns; the "
     "2x8 configuration has requant_lanes 2$"),
    ({"fused_max_pool": True, "pipeline_registers": True},
     "^fused_max_pool needs .*; the 2x8 configuration has bank_access 'scheduled'$"),
    ({"registered_writes": 1}, "^registered_writes must be true or false, not 1$"),
    ({"bank_access": "ahead"}, "^bank_access must be one of arbitrated, scheduled, not 'ahead'$"),
    ({"bank_access": "scheduled"},
     "^registered_operands and bank_access 'scheduled' go together: the scheduled window offers "
     "its beat from a register behind a skid, the arbitrated one straight from the banks; the 2x8 "
     "configuration has registered_operands False and bank_access 'scheduled'$"),
    ({"pipeline_registers": True, "registered_operands": False},
     "^registered_operands and bank_access 'scheduled' go together: .* has registered_operands "
     "False and bank_access 'scheduled'$"),
    ({"fused_max_pool": True, "cols": 1},
     "^fused_max_pool needs .*; the 2x1 configuration has 1 column$"),
    ({"pair_products": True, "operand_width": 12}, "operand_width at most 8, not 12$"),
    ({"pair_products": True, "acc_width": 16},
     r"^acc_width 16 cannot hold one 8x8-bit product pair \(17 bits\)$"),
    ({"requant_mode": "tflite", "requant_mult_bits": 4},
     "^requant_mult_bits 4: the tflite requantization keeps TFLite's 31-bit multipliers"),
])
def test_bad_parameters_name_themselves(changes, message):
    with pytest.raises(ConfigError, match=message):
        AcceleratorConfig(**changes)


def test_timing_knobs_follow_the_set_unless_given():
    """Each knob not given takes pipeline_registers' set; one given overrides it, survives a
    replace and JSON, and is the only knob JSON writes (a set is written as one key)."""
    for registered in (False, True):
        config = AcceleratorConfig(pipeline_registers=registered)
        assert {name: getattr(config, name) for name in TIMING_SETS} == \
            {name: values[registered] for name, values in TIMING_SETS.items()}
        assert not set(TIMING_SETS) & set(config.to_dict())
    assert AcceleratorConfig().replace(pipeline_registers=True) == AcceleratorConfig(pipeline_registers=True)
    mixed = AcceleratorConfig(pipeline_registers=True, registered_host_output=False)
    assert mixed.timing_overrides() == {"registered_host_output": False}
    assert mixed.to_dict()["registered_host_output"] is False
    assert AcceleratorConfig.from_json(mixed.to_json()) == mixed
    assert mixed.replace(rows=4).registered_host_output is False
    assert mixed.replace(pipeline_registers=False).timing_overrides() == {}
    assert (mixed.operand_latency, mixed.array_latency, mixed.write_latency) == (3, 11, 5)
    plain = AcceleratorConfig(registered_results=True)
    assert (plain.array_latency, plain.write_latency, plain.operand_latency) == (11, 5, 1)


def test_bad_json_and_keys():
    with pytest.raises(ConfigError, match="unknown configuration key"):
        AcceleratorConfig.from_dict({"rows": 2, "colums": 8})
    with pytest.raises(ConfigError, match="not valid JSON"):
        AcceleratorConfig.from_json("{rows: 2")
    with pytest.raises(ConfigError, match="must be a JSON object"):
        AcceleratorConfig.from_json("[2, 8]")


def test_parse_array():
    assert AcceleratorConfig.parse_array("4X16").macs_per_cycle == 64
    with pytest.raises(ConfigError, match="not of the form ROWSxCOLS"):
        AcceleratorConfig.parse_array("16")


def test_frozen():
    with pytest.raises(Exception):
        DEFAULT_CONFIG.rows = 3
    assert DEFAULT_CONFIG.replace(rows=3).rows == 3


def test_requantization_modes_and_their_latencies():
    """A mode given without a latency gets the mode's first (constructor, JSON, replace); the
    modes' latencies are disjoint, so a board's PING (which reports requant_latency) tells its
    mode; each (mode, latency) has a requantizer variant."""
    assert AcceleratorConfig().requant_latency == 4
    assert AcceleratorConfig(requant_mode="tflite").requant_latency == 6
    assert AcceleratorConfig.from_dict({"requant_mode": "tflite"}).requant_latency == 6
    assert AcceleratorConfig(requant_latency=5).replace(requant_mode="tflite").requant_latency == 6
    assert AcceleratorConfig(requant_latency=5).replace(requant_mode="fpganet").requant_latency == 5
    with pytest.raises(ConfigError, match="requant_latency must be 6 .* not 5"):
        AcceleratorConfig(requant_mode="tflite", requant_latency=5)
    with pytest.raises(ConfigError, match="requant_mode must be one of fpganet, tflite, not 'x'"):
        AcceleratorConfig(requant_mode="x")
    latencies = [set(values) for values in REQUANT_LATENCIES.values()]
    assert not set.intersection(*latencies)
    modes = {cls.requant_mode for cls in VARIANTS.values()}
    assert {(cls.requant_mode, latency) for (_, latency), cls in VARIANTS.items()} == \
        {(mode, latency) for mode in modes for latency in REQUANT_LATENCIES[mode]}


def test_pair_products_double_the_macs_and_the_weight_word():
    """Two products a PE: twice the MACs, two bytes a row in a weight word, a cycle more in the
    PE, and the accumulator checked against the pair's 17-bit sum."""
    single = AcceleratorConfig(rows=4, cols=2, acc_width=24, broadcast_operands=True)
    pairs = single.replace(pair_products=True)
    assert (pairs.macs_per_cycle, single.macs_per_cycle) == (16, 8)
    assert (pairs.weight_word_bytes, pairs.pe_operand_width, pairs.pe_sum_width) == (8, 16, 17)
    assert pairs.array_latency == single.array_latency + 1 == 4
    assert pairs.to_dict()["derived"]["products_per_pe"] == 2
    assert AcceleratorConfig.from_json(pairs.to_json()) == pairs
    assert AcceleratorConfig(pair_products=True, acc_width=17).pe_sum_width == 17
