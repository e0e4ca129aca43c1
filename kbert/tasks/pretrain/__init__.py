"""`python -m kbert.tasks.pretrain`: pretraining data and pretraining."""
