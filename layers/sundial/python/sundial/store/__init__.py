"""DynamoDB: the only package that knows the single-table layout. One module per item kind.

Item kinds in the one table (pk, sk):
- job              ("shard#<n>", "<due ms, 13 digits>#<ULID>")       jobs, job_items, attempts;
                   a DAG node is a job item with DAG attributes       dag_nodes
- sweep cursor     ("shard#<n>", "cursor")                            sweeps
- sweep done       ("shard#<n>", "done#<sweep token>")                sweeps
- shard count      ("meta", "shards")                                 sweeps
- idempotency key  ("idem#<sha256(queue, key)>", "idem")              idempotency
- schedule, run    ("sched#<id>", "schedule" / "run#<time>")          schedules
- queue state      ("queues", "<queue name>")                         queue_states
- dead letter      ("dead#<queue>", "<dead at ms>#<job or message>")  dead_letters
- submission window ("quota#<queue>#<lane>", "window#<epoch second>") submission_windows
The cursor and done keys sort after every job key, so a shard's due-range query never sees
them. table.py holds what every store shares: the attribute codec, conditional writes,
paginated queries and transactions. The table's own definition (keys, stream, TTL) is
stacks/job_table.py.
"""
