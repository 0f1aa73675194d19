"""The long-term memory chain's pure logic: judge, dedupe, conflict rules and summaries."""
