"""`python -m bench.section NAME PROFILE CONFIG_JSON WORKDIR`: one section, in its own process."""

import sys

from bench.suite import section_main

if __name__ == "__main__":
    section_main(sys.argv[1:])
