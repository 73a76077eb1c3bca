"""Tests of the trace-driven simulator."""
