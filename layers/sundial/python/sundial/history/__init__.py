"""The job history: DynamoDB stream records become history events in S3."""
