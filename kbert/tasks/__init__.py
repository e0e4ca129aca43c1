"""Fine-tuning tasks: pure functions plus thin command lines."""
