"""Spark checkpoint folders, through fsspec (``fsspec_storage``): local and mounted
folders with fsspec alone; ``s3://`` with the ``s3`` extra (s3fs), imported only when a
followed folder is on S3.
"""
