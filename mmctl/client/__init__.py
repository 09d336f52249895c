"""Talking to a worker: channel, worker facts, bundle, negotiation, send."""
