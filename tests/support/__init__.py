"""Helpers of the tests (never imported by the product or the benchmarks)."""
