try:
    from mmctl._entry import run
except KeyboardInterrupt:  # Ctrl-C while the interpreter was still importing this
    import sys

    sys.stderr.write("Error: interrupted by SIGINT\n")
    sys.exit(130)

run()
