"""kbert models."""
