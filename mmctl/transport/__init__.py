"""Tensor transports: inline bytes and /dev/shm segments."""
