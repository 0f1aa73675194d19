"""The long-term memory chain: judge, dedupe, conflict rules, episode retention, and the
stages that wait for the history stage and keep each user's plans in order."""
