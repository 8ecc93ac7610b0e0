"""Reference DDP HuggingFace trainer and the parity tools that check a port trains like the original."""
