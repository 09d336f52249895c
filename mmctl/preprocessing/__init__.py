"""Pure-numpy preprocessing: resize targets, sampling, normalize, patchify."""
