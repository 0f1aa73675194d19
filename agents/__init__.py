"""Stream stages, one module per Faust agent."""
