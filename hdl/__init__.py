"""Amaranth gateware of the fpganet accelerator."""
