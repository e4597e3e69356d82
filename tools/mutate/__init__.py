"""Mutation testing of the project's modules against the tests that exercise them."""
