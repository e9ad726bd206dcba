"""Benchmarks (performance claims live here, never in timed unit tests)."""

import os

# The functions' Powertools settings as deployed (stacks/functions.py), set before any sundial
# module is imported: a Powertools child logger (the consumer SDK's, sundial.runs.*) is named
# under the service when it is made, and one made without it logs to no handler, so the bench
# would not count what it prints in Lambda.
POWERTOOLS_SERVICE = {
    "POWERTOOLS_SERVICE_NAME": "sundial",
    "POWERTOOLS_METRICS_NAMESPACE": "Sundial",
    "POWERTOOLS_TRACE_DISABLED": "1",
}
for _name, _value in POWERTOOLS_SERVICE.items():
    os.environ.setdefault(_name, _value)
