"""Corpus, vocabulary and the toy sequence tasks built from the notebooks' sentences."""
