"""Spark checkpoint folders, through fsspec; a store's extra (s3fs, ...) is imported only
when a followed folder is on it."""
