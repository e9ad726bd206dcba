"""DynamoDB: the only package that knows the single-table layout (see __init__ docstring)."""
