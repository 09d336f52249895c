"""mmctl: multimodal gRPC requests to vLLM workers, from the command line."""

__version__ = "0.1.0"
