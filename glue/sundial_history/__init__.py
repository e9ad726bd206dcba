"""Sundial's job history pipeline on Spark: the Glue 5.0 jobs `compact_history` and
`history_report` (entry scripts beside this package), their pure DataFrame transforms, and a
synthetic history generator for tests and benchmarks. Runs unchanged on AWS Glue 5.0 and on
plain local `pyspark==3.5.4`."""
