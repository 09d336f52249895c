import sys

from mmctl.cli.app import main

sys.exit(main())
