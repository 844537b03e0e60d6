"""The Spark side's sender (the listener's own distribution), against real HTTP servers."""
