"""One module per command: parse its options, call the library, print. Nothing below this
layer sees an argparse.Namespace. Shared options are defined once, in options.py."""
