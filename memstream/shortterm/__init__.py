"""Short-term memory: the conversation summary, folded extractively or written by a model."""
