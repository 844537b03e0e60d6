"""What Spark writes, read into checkpoints: a query's progress event and its checkpoint
folder's files."""
