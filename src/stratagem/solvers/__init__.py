"""Solvers over immutable game trees (SPEC §9): best response, exploitability, and later CFR."""
