"""The load path: the short-term window and the long-term budget behind ``POST /v1/context``."""
