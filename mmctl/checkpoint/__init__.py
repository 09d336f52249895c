"""A checkpoint's files: where they are (:mod:`.source`: a model folder, a
worker's tokenizer bundle, or the built-in Qwen tokenizer) and the JSON
configs read from them (:mod:`.files`). Below everything that reads them:
it imports nothing of mmctl but errors and settings."""
