"""Media decoding: video with PyAV, images with Pillow, into RGB uint8 arrays."""
