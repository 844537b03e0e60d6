"""A group's lag and status: Burrow's evaluator, lag in time, data at risk, and the
reports readers see."""
