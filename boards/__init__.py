"""Board top-levels on amaranth-boards platforms (see boards/README.md)."""
