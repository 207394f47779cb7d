"""An SPI mode-0 host for amaranth.sim testbenches: whole transactions on a target's pins,
bit by bit, at a chosen SCK period (asynchronous to the design's clock)."""

__all__ = ["spi_exchange"]


async def spi_exchange(ctx, target, mosi, sck_period, *, cut_bits=None, setup=None):
    """Clock the bytes ``mosi`` through ``target`` (``sck``, ``cs_n``, ``mosi``, ``miso``) in
    one transaction and return the MISO bytes; with ``cut_bits``, chip select rises after that
    many bits (the last byte then comes back partial, its missing bits zero)."""
    half = sck_period / 2
    bits = len(mosi) * 8 if cut_bits is None else cut_bits
    ctx.set(target.cs_n, 0)
    await ctx.delay(half if setup is None else setup)
    miso = bytearray(-(-bits // 8))
    for index in range(bits):
        byte, position = divmod(index, 8)
        ctx.set(target.mosi, (mosi[byte] >> (7 - position)) & 1)
        await ctx.delay(half)
        # The host samples MISO at the rising edge, where the target's falling edge set it.
        miso[byte] |= ctx.get(target.miso) << (7 - position)
        ctx.set(target.sck, 1)
        await ctx.delay(half)
        ctx.set(target.sck, 0)
    await ctx.delay(half)
    ctx.set(target.cs_n, 1)
    await ctx.delay(half)
    return bytes(miso)
