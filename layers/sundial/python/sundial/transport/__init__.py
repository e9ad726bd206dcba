"""SQS: the message envelope, the sender and the receiver."""
