import sys

from logstats.cli import main

sys.exit(main())
