"""Reads: cache-aside entities, order views, rankings."""
