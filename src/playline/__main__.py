"""``python -m playline``: the command line (what the web UI's Resume starts)."""

from playline.cli import main

main()
