"""Faust wiring: the app (``streams.app``) and its topics (``streams.topics``)."""
