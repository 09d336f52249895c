"""The command-line layer: parse arguments, call the library, render."""
