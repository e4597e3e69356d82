"""Helpers, fixtures and child scripts shared by the tests (the one support package)."""
