"""The SPI link's transactions: how the host link's byte streams ride on SPI mode 0.

The board is an SPI target (mode 0: SCK idles low, both sides sample on the rising edge,
most significant bit first). Each transaction (chip select low, whole bytes, chip select
high) carries bytes both ways at once::

    MOSI  COMMAND | n (2, little-endian) | n link bytes | anything
    MISO  MAGIC   | link bytes, escaped, IDLE where there are none

- Host to board: the ``n`` bytes after the header go to the frame parser, unchanged; the
  rest of the transaction is ignored, so the host may clock as long as it likes to read.
  A transaction whose first byte is not :data:`COMMAND` writes nothing and reads nothing.
- Board to host: the first byte is :data:`MAGIC` (a board that is not there reads 0xFF or
  0x00); then each byte is a reply byte when the board has one, else :data:`IDLE`. Reply
  bytes equal to :data:`IDLE` or :data:`ESCAPE` go as :data:`ESCAPE` and the byte XOR
  :data:`ESCAPE_XOR`. A reply byte leaves the board's queue only when its last bit has been
  clocked, so a transaction may end anywhere: an escape cut off at the end is sent again.

The frames inside are the UART link's (:mod:`fpganet.link.protocol`), with their CRC and
error replies. This module is the one definition that the gateware
(:mod:`fpganet.hdl.spi_target`) and the host side (:mod:`fpganet.link.spi`) share.
"""

__all__ = ["COMMAND", "MAGIC", "IDLE", "ESCAPE", "ESCAPE_XOR", "HEADER_BYTES",
           "MAX_WRITE", "transaction", "MisoDecoder"]

#: First MOSI byte of a transaction.
COMMAND = 0x3C
#: First MISO byte of a transaction.
MAGIC = 0x5A
#: MISO byte when the board has no reply byte.
IDLE = 0xFF
#: MISO byte that announces an escaped reply byte.
ESCAPE = 0xFE
ESCAPE_XOR = 0x20
#: Bytes before the link bytes: COMMAND and the 16-bit count.
HEADER_BYTES = 3
#: Most link bytes one transaction carries to the board.
MAX_WRITE = 0xFFFF


def transaction(data, length=None):
    """The MOSI bytes of a transaction carrying ``data`` to the board, padded with zeros to
    ``length`` link bytes (to read while nothing is sent)."""
    data = bytes(data)
    if len(data) > MAX_WRITE:
        raise ValueError(f"{len(data):,} bytes exceed the {MAX_WRITE:,} one SPI transaction "
                         f"carries")
    length = len(data) if length is None else max(length, len(data))
    return bytes([COMMAND]) + len(data).to_bytes(2, "little") + data + bytes(length - len(data))


class MisoDecoder:
    """Reply bytes out of each transaction's MISO bytes.

    ``decode(miso)`` returns the reply bytes, or raises ValueError when the first byte is not
    :data:`MAGIC` (no board, or not an fpganet SPI link). An escape at a transaction's end is
    dropped: the board sends it again.
    """

    def decode(self, miso):
        miso = bytes(miso)
        if not miso or miso[0] != MAGIC:
            first = f"{miso[0]:#04x}" if miso else "nothing"
            raise ValueError(f"the SPI target answered {first}, not the link's {MAGIC:#04x}")
        out = bytearray()
        escaped = False
        for byte in miso[1:]:
            if escaped:
                out.append(byte ^ ESCAPE_XOR)
                escaped = False
            elif byte == ESCAPE:
                escaped = True
            elif byte != IDLE:
                out.append(byte)
        return bytes(out)
