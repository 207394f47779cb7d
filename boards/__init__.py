"""Board top-levels on amaranth-boards platforms (see docs/journal/boards.md).

``fpganet.boards.build.build(board, config, output)`` synthesizes, places and
routes a board design and writes ``report.json``; ``main(argv)`` is its
command line.
"""
