"""Prompt tokens: tokenizer, chat rendering, placeholder expansion, the mrope check."""
