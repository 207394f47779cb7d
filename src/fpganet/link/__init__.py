"""The host side of a board: the UART host-link protocol and its driver.

- :mod:`fpganet.board.protocol` frames, CRC, commands, error codes, reply payloads
  (shared with the gateware, :mod:`fpganet.hdl.hostlink`);
- :mod:`fpganet.board.driver` :class:`~fpganet.board.driver.BoardLink` (pyserial or any
  port object), :func:`~fpganet.board.driver.run_images`, ``fpganet board`` (``main``);
- :mod:`fpganet.board.simport` a port whose other end is the HostLink gateware in
  amaranth.sim.

See docs/hostlink.md.
"""
