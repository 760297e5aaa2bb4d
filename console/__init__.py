"""vllm-console: a terminal control console for a GPU host running vllm serve."""

__version__ = "0.1.0"
