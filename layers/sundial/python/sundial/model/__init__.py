"""What a job, a DAG and a schedule are: data and validation. No AWS here."""
