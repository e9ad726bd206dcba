"""One attempt of a job wherever it runs: the attempt lifecycle, the SQS-triggered consumer,
leases for workers outside Lambda, the worker itself."""
