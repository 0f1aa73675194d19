"""Text handling every stage shares: scripts, normalising, terms, similarity, token counts."""
