"""Faust wiring: the app (``streams.app``), its topics and the worker entry point.

Installed, this folder is ``memstream.streams``; nothing outside the wiring imports it.
"""
