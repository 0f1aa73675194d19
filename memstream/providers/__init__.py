"""Long-term memory providers: one small interface, one adapter per system."""
