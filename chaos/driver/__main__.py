"""``python -m chaos.driver RUN_DIR INCARNATION`` (and ``--spare DIR``): the driver process."""
import sys

from chaos.driver.process import main

sys.exit(main(sys.argv[1:]))
