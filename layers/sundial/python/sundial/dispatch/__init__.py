"""The timer path: the fan-out launches one sweeper per group of shards; a sweeper claims
and sends the due jobs of its shards."""
