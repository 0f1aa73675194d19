"""Benchmarks on the real services; ``python -m bench`` runs them all (``make bench``)."""
