"""The use cases behind the API: jobs, DAGs, schedules, queues, dead letters."""
