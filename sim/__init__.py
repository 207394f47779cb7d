"""Simulation of the generated Verilog: cocotb testbenches and the simulator runner."""
